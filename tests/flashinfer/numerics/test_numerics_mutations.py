"""The numerics check catches wrong kernels: a mutation suite through the real compare path.

For every dtype combination the reference generates and both fusions, a stand-in for the kernel
(numerics_standin.py) computes D the way the GPU does, on both input families: the exact one
(D known bit for bit) and the full-mantissa one (D known to an interval, docs/numerics.md). That
D, written to d.bin and read back as the hardware backend reads it, must pass :func:`compare`
against the family's expected D; each mutation of the kernel must fail it in at least one
family, at every fan-in (finalize: one to three rows per token, top-2 and top-8), except where
docs/numerics.md derives why it cannot (:func:`allowed_escape`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers.numerics_standin import MUTATIONS, Setup, block_off_by_one_ulp, kernel, setup

from pytest_tileconform.dtypes import dtype_label
from pytest_tileconform.flashinfer.numerics.full import EXACT, FAMILIES, FULL
from pytest_tileconform.flashinfer.numerics.reference import (
    GENERATED_BLOCK_SCALED,
    GENERATED_DTYPES,
    output_dtype,
)
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes, read_output
from pytest_tileconform.flashinfer.numerics.tolerance import NumericsReport, compare
from pytest_tileconform.flashinfer.presets import route
from pytest_tileconform.flashinfer.problem import Problem

OUTPUTS = ("bf16", "fp16", "fp32")
#: Every (act, weight, out) the reference generates.
DTYPES = [
    (act, weight, out)
    for act, weight in [(t, t) for t in GENERATED_DTYPES] + list(GENERATED_BLOCK_SCALED)
    for out in OUTPUTS
]
N, K = 128, 256
#: Experts with 37, 0, 64, 100 and 5 rows: an empty expert, partial M tiles, and (finalize)
#: 106 tokens receiving one to three rows each, six of them none.
PROBLEM = Problem(rows=(37, 0, 64, 100, 5), n=N, k=K, bias=True)
#: Batches as the presets route them: 48 tokens to 2 (8) of 16 experts each (some left empty),
#: so every finalize token receives two (eight) rows.
TOP2 = Problem(rows=route(16, 48, 2, 0), n=N, k=K, bias=True, tokens=48, top_k=2)
TOP8 = Problem(rows=route(16, 48, 8, 0), n=N, k=K, bias=True, tokens=48, top_k=8)
PROBLEMS = {"fan-in-1-3": PROBLEM, "top2": TOP2, "top8": TOP8}


def dtype_id(combo: tuple[str, str, str]) -> str:
    return dtype_label(*combo)


def check(s: Setup, d: torch.Tensor, tmp_path: Path) -> NumericsReport:
    """``d`` through the hardware backend's path: d.bin written, read back, compared."""
    (tmp_path / "d.bin").write_bytes(_le_bytes(d.to(output_dtype(s.case.out))))
    return compare(read_output(tmp_path, s.inputs), s.expected)


#: Below what seven rounded red.adds may move a token's sum (finalize at top-8, docs/numerics.md
#: section 6b): bf16 (8 bits) hides a 0.1% scale, one expert of eight 1% off, an alpha held
#: in bf16 or fp16, fp16 accumulation, a rounding toward zero or twice; fp16 (11 bits) the
#: last four; fp32 the last two.
HIDDEN_BY_TOP8 = {
    "bf16": {
        "global-scale-0.999",
        "global-scale-1.001",
        "hot-expert-1.01",
        "bf16-alpha",
        "fp16-alpha",
        "fp16-accumulation",
        "double-rounding",
        "round-toward-zero",
        "64x128-block-off-by-one-ulp",
    },
    "fp16": {
        "fp16-alpha",
        "fp16-accumulation",
        "double-rounding",
        "round-toward-zero",
        "64x128-block-off-by-one-ulp",
    },
    "fp32": {"double-rounding", "round-toward-zero"},
}
#: the conversion to the output type, rounded otherwise: below an fp32 output's freedom
FP32_ROUNDING = {"double-rounding", "round-toward-zero"}


def allowed_escape(mutation: str, combo: tuple[str, str, str], fusion: str, problem: str) -> str | None:
    """Why ``mutation`` cannot fail this case in either family (docs/numerics.md, section 6b),
    or None: it must fail."""
    act, weight, out = combo
    types = {act, weight}
    if mutation == "finalize-stores" and fusion != "finalize":
        return "nothing to reduce"
    if mutation == "e4m3-operands" and types & {"fp8_e4m3", "mxfp8"}:
        return "A and B are e4m3 values already (MX: e4m3 or e2m1 times a power of two)"
    if mutation in ("bf16-alpha", "fp16-alpha") and act not in ("fp8_e4m3", "nvfp4"):
        return "no alpha"
    if mutation == "e2m1-codes-4-7-linear" and not types & {"nvfp4", "mxfp4"}:
        return "no e2m1 operand"
    if mutation == "block-scale-mantissa-ignored" and act != "nvfp4":
        return "no e4m3 block scale (ue8m0 has no mantissa)"
    if fusion == "finalize" and problem == "top8" and mutation in HIDDEN_BY_TOP8[out]:
        return "within what the order of eight rounded adds may do"
    if mutation == "double-rounding" and out == "fp16" and act in ("fp16", "fp32"):
        return "it moves D only within 1/16 ulp of a midpoint, inside the interval of 22-bit products"
    if out == "fp32" and mutation in FP32_ROUNDING:
        if fusion == "none" and act not in ("fp8_e4m3", "nvfp4"):
            return "nothing is rounded: D is the fp32 accumulator"
        if act in ("fp16", "fp32"):
            return "below the accumulation bound of 11-bit operands"
    return None


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """The problems are tiny: torch's thread pool would cost more than the work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fusion", ["none", "finalize"])
@pytest.mark.parametrize("combo", DTYPES, ids=dtype_id)
def test_a_correct_kernel_passes(
    combo: tuple[str, str, str], fusion: str, family: str, tmp_path: Path
) -> None:
    for problem in (PROBLEM, TOP8) if fusion == "finalize" else (PROBLEM,):
        s = setup(combo, fusion, problem, family)
        for order in range(3 if fusion == "finalize" else 1):  # any order of finalize's adds
            report = check(s, kernel(s.inputs, order_seed=order), tmp_path)
            assert report.ok and report.over_bound == 0, report.summary()
            assert report.nonfinite == report.unwritten == 0
        if fusion == "none" and family == EXACT:  # exact: the correctly rounded value, bit for bit
            assert report.exact and report.max_ulp_err <= 0.5 and report.max_bound_ulp == 0
        elif family == EXACT:  # within the reduction order's bound; exact in fp32, where no add rounds here
            assert report.max_ulp_err <= report.max_bound_ulp and report.exact == (combo[2] == "fp32")


def outcomes(combo: tuple[str, str, str], fusion: str, problem: str, tmp_path: Path) -> dict[str, str | None]:
    """Each mutation -> None if it failed the check in some family, else how it passed (the
    families' reports) or why it does not apply."""
    found: dict[str, str | None] = {}
    setups = {family: setup(combo, fusion, PROBLEMS[problem], family) for family in FAMILIES}
    for name, mutate in MUTATIONS.items():
        passed: list[str] = []
        for family, s in setups.items():
            if len(passed) < list(setups).index(family):
                break  # failed in an earlier family already
            d = mutate(s)
            if d is None:
                passed.append(f"{family}: does not apply")
                continue
            if torch.equal(d.view(torch.uint8), s.correct.view(torch.uint8)):
                passed.append(f"{family}: D unchanged")
                continue
            report = check(s, d, tmp_path)
            if report.ok or report.over_bound == 0 or "MISMATCH" not in report.summary():
                passed.append(f"{family}: {report.summary()}")
            elif name == "unwritten-d" and fusion == "none":
                assert report.unwritten == report.total == report.nonfinite, report.summary()
        found[name] = None if len(passed) < len(setups) else "; ".join(passed)
    return found


#: without fusion a token's fan-in does not matter: one problem; finalize at every fan-in
CASES = [("none", "fan-in-1-3")] + [("finalize", problem) for problem in PROBLEMS]


@pytest.mark.parametrize(("fusion", "problem"), CASES, ids=[f"{f}-{p}" for f, p in CASES])
@pytest.mark.parametrize("combo", DTYPES, ids=dtype_id)
def test_every_mutation_fails(combo: tuple[str, str, str], fusion: str, problem: str, tmp_path: Path) -> None:
    """Every mutation fails in at least one family, except the escapes docs/numerics.md derives."""
    found = outcomes(combo, fusion, problem, tmp_path)
    escaped = [
        f"{name}: {how}"
        for name, how in found.items()
        if how is not None and allowed_escape(name, combo, fusion, problem) is None
    ]
    assert not escaped, "mutations that passed the check:\n" + "\n".join(escaped)


@pytest.mark.parametrize("combo", [c for c in DTYPES if c[2] == "fp32"], ids=dtype_id)
def test_fp32_finalize_catches_one_ulp(combo: tuple[str, str, str], tmp_path: Path) -> None:
    """In fp32 the exact family's finalize at top-8 is exact: one ulp in a block fails."""
    s = setup(combo, "finalize", TOP8, EXACT)
    assert s.expected.exact
    assert not check(s, block_off_by_one_ulp(s), tmp_path).ok


def test_full_family_has_full_mantissas() -> None:
    """The full family draws what it says: all 16 e2m1 codes, e4m3 block scales with mantissa
    bits, alphas and router scales of 24 significant bits, values over several binades."""
    s = setup(("nvfp4", "nvfp4", "bf16"), "finalize", PROBLEM, FULL)
    codes = set(torch.cat([s.inputs.a & 0x0F, s.inputs.a >> 4]).flatten().tolist())
    assert len(codes) == 16
    assert s.inputs.a_sf is not None and s.inputs.alpha is not None and s.inputs.router_scales is not None
    scales = s.inputs.a_sf.view(torch.float8_e4m3fn).double()
    assert bool((torch.frexp(scales).mantissa != 0.5).any())  # not all powers of two
    for t in (s.inputs.alpha, s.inputs.router_scales):
        assert bool(((t.view(torch.int32) & 1) == 1).all())  # the 24th significant bit is set
    a = setup(("bf16", "bf16", "bf16"), "none", PROBLEM, FULL).inputs.a.double().abs()
    assert len(set(torch.log2(a[a > 0]).floor().tolist())) >= 4
