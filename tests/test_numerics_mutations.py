"""The numerics check catches wrong kernels: a mutation suite through the real compare path.

For every dtype combination the reference generates and both fusions, a stand-in for the kernel
computes D the way the GPU does (fp32 accumulation, the epilogue's fp32 math, round to nearest
into the output type, finalize's red.adds into a zeroed D in a random order). That D, written
to d.bin and read back as the hardware backend reads it, must pass :func:`compare` against
:func:`expected_output`; each mutation of the kernel (a wrong scale, a skipped K tile, a dropped
row, garbage, ...) must fail it. docs/numerics.md derives the bounds this relies on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch

from pytest_tileconform.dtypes import dtype_label
from pytest_tileconform.flashinfer.numerics.reference import (
    GENERATED_BLOCK_SCALED,
    GENERATED_DTYPES,
    GroupedInputs,
    dequantize,
    expected_output,
    make_inputs,
    output_dtype,
    poison_output,
)
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes, read_output
from pytest_tileconform.flashinfer.numerics.tolerance import Expected, NumericsReport, compare
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.matrix.problems import route
from pytest_tileconform.matrix.schema import Problem

OUTPUTS = ("bf16", "fp16", "fp32")
#: Every (act, weight, out) the reference generates.
DTYPES = [
    (act, weight, out)
    for act, weight in [(t, t) for t in GENERATED_DTYPES] + list(GENERATED_BLOCK_SCALED)
    for out in OUTPUTS
]
N, K, TILE = 128, 256, (128, 128, 64)
#: Experts with 37, 0, 64, 100 and 5 rows: an empty expert, partial M tiles, and (finalize)
#: 106 tokens receiving one to three rows each, six of them none.
PROBLEM = Problem(rows=(37, 0, 64, 100, 5), n=N, k=K, bias=True)
#: A top-8 batch as the presets route it: 48 tokens to 8 of 16 experts each (three left empty),
#: so every finalize token receives eight rows.
TOP8 = Problem(rows=route(16, 48, 8, 0), n=N, k=K, bias=True, tokens=48, top_k=8)
SEED = 5


def dtype_id(combo: tuple[str, str, str]) -> str:
    return dtype_label(*combo)


def case_for(act: str, weight: str, out: str, fusion: str, problem: Problem = PROBLEM) -> Case:
    return Case(
        matrix=Path("mutations.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm90",
        act=act,
        weight=weight,
        out=out,
        dtype_label=dtype_label(act, weight, out),
        tile=TILE,
        cluster=(1, 1, 1),
        swap_ab=False,
        fusion=fusion,
        problem=problem,
        expectation=None,
        suite=None,
    )


# ------------------------------------------------------------------------------------------
# A stand-in kernel: the GEMM and its epilogue as the GPU computes them


@dataclass(frozen=True)
class Operands:
    """A case's operands as the tensor cores see them (float32, block scales applied)."""

    a: torch.Tensor  #: sum(rows) x K
    b: torch.Tensor  #: E x N x K
    alpha: torch.Tensor | None
    k: int  #: how much of K the kernel accumulates


def operands(inputs: GroupedInputs) -> Operands:
    a_sf, b_sf = inputs.a_sf, inputs.b_sf
    a = dequantize(inputs.a, inputs.act, a_sf)
    b = torch.stack(
        [
            dequantize(inputs.b[e], inputs.weight, None if b_sf is None else b_sf[e])
            for e in range(inputs.experts)
        ]
    )
    return Operands(a, b, inputs.alpha, inputs.k)


def expert_of_rows(inputs: GroupedInputs) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(inputs.experts), torch.tensor(inputs.rows_per_expert))


def contributions(inputs: GroupedInputs, ops: Operands) -> torch.Tensor:
    """Each row's epilogue result in fp32: ``alpha * acc`` (+ bias, * router with finalize)."""
    acc = torch.zeros(inputs.total_rows, inputs.n)
    for e, rows in inputs.expert_slices():
        acc[rows] = ops.a[rows, : ops.k] @ ops.b[e, :, : ops.k].T  # exact: docs/numerics.md
    experts = expert_of_rows(inputs)
    scaled = acc.double() * (1.0 if ops.alpha is None else ops.alpha[experts].double().unsqueeze(1))
    if inputs.fusion != "finalize":
        return scaled.float()
    if inputs.bias is not None:
        scaled = scaled.float().double() + inputs.bias.double()[experts]  # one fp32 rounding (fma)
    assert inputs.router_scales is not None
    return (scaled.float().double() * inputs.router_scales.double().unsqueeze(1)).float()


def kernel(
    inputs: GroupedInputs,
    ops: Operands | None = None,
    *,
    order_seed: int = 0,
    store: bool = False,
    drop_row: int | None = None,
) -> torch.Tensor:
    """D as a kernel computing ``ops`` writes it (in the output dtype)."""
    out = output_dtype(inputs.out)
    v = contributions(inputs, ops or operands(inputs)).to(out)
    if inputs.fusion != "finalize":
        if drop_row is not None:
            v[drop_row] = poison_output(1, inputs.n, inputs.out)[0]
        return v
    assert inputs.dest_row is not None
    keep = torch.ones(v.shape[0], dtype=torch.bool)
    if drop_row is not None:
        keep[drop_row] = False
    order = torch.randperm(v.shape[0], generator=torch.Generator().manual_seed(order_seed))
    order = order[keep[order]]
    dest = inputs.dest_row.long()[order]
    # the position of each row among its token's rows in this order: the adds run rank by rank
    first = torch.argsort(dest, stable=True)
    counts = torch.bincount(dest, minlength=inputs.out_rows)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(dest)
    rank[first] = torch.arange(dest.numel()) - starts[dest[first]]
    d = torch.zeros(inputs.out_rows, inputs.n, dtype=out)
    for j in range(int(rank.max()) + 1 if rank.numel() else 0):
        pick = rank == j
        tokens, rows = dest[pick], v[order[pick]]
        # red.add: each add rounds to nearest in the output type (store: the last row wins)
        d[tokens] = rows if store else (d[tokens].float() + rows.float()).to(out)
    return d


# ------------------------------------------------------------------------------------------
# The mutations


@dataclass(frozen=True)
class Setup:
    case: Case
    inputs: GroupedInputs
    expected: Expected
    correct: torch.Tensor  #: a correct kernel's D (output dtype)


@functools.cache
def setup(combo: tuple[str, str, str], fusion: str, problem: Problem = PROBLEM) -> Setup:
    case = case_for(*combo, fusion, problem)
    inputs = make_inputs(case, SEED)
    return Setup(case, inputs, expected_output(inputs, case), kernel(inputs))


def neighbour_expert(inputs: GroupedInputs) -> int:
    """The first expert with rows that has a next expert: it takes that one's scale."""
    return next(e for e, r in enumerate(inputs.rows_per_expert[:-1]) if r)


def with_bits(d: torch.Tensor, change: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    ints = {2: torch.int16, 4: torch.int32}[d.element_size()]
    return change(d.view(ints).clone()).view(d.dtype)


def scaled(factor: float) -> Callable[[Setup], torch.Tensor]:
    return lambda s: (s.correct.double() * factor).to(s.correct.dtype)


def garbage(count: int) -> Callable[[Setup], torch.Tensor]:
    def mutate(s: Setup) -> torch.Tensor:
        gen = torch.Generator().manual_seed(count)
        d = s.correct.clone()
        flat = d.view(-1)
        where = torch.randperm(flat.numel(), generator=gen)[:count]
        size = d.element_size() * 8
        bits = torch.randint(-(2 ** (size - 1)), 2 ** (size - 1), (count,), generator=gen)
        ints = {16: torch.int16, 32: torch.int32}[size]
        noise = bits.to(ints).view(d.dtype)
        same = noise.view(ints) == flat[where].view(ints)
        noise = torch.where(same, (noise.view(ints) ^ 1).view(d.dtype), noise)
        flat[where] = noise
        return d

    return mutate


def neighbour_scale(s: Setup) -> torch.Tensor:
    """Expert e computes with expert e+1's scale: its block scales (block-scaled types), its
    alpha (fp8), or, where a type has no scale, its weights (the pointer array off by one)."""
    inputs, e = s.inputs, neighbour_expert(s.inputs)
    ops = operands(inputs)
    if inputs.b_sf is not None:
        b = ops.b.clone()
        b[e] = dequantize(inputs.b[e], inputs.weight, inputs.b_sf[e + 1])
        return kernel(inputs, replace(ops, b=b))
    if ops.alpha is not None:
        alpha = ops.alpha.clone()
        alpha[e] = alpha[e + 1]
        return kernel(inputs, replace(ops, alpha=alpha))
    b = ops.b.clone()
    b[e] = b[e + 1]
    return kernel(inputs, replace(ops, b=b))


def block_off_by_one_ulp(s: Setup) -> torch.Tensor:
    """A 64 x 128 block of D one unit in the last place larger in magnitude."""

    def change(bits: torch.Tensor) -> torch.Tensor:
        bits[:64, :128] += 1
        return bits

    return with_bits(s.correct, change)


def transposed_b(s: Setup) -> torch.Tensor:
    """Every expert's N x K weights read as if they were stored K x N."""
    ops = operands(s.inputs)
    b = ops.b.reshape(ops.b.shape[0], -1).reshape(ops.b.shape[0], ops.k, -1).transpose(1, 2)
    return kernel(s.inputs, replace(ops, b=b.contiguous()))


def skipped_last_k_tile(s: Setup) -> torch.Tensor:
    return kernel(s.inputs, replace(operands(s.inputs), k=s.inputs.k - s.case.tile[2]))


def small_values_zeroed(s: Setup) -> torch.Tensor:
    """The smallest tenth of D's non-zero magnitudes flushed to zero."""
    d = s.correct.clone()
    magnitude = d.float().abs()
    threshold = torch.quantile(magnitude[magnitude > 0], 0.1)
    d[(magnitude > 0) & (magnitude <= threshold)] = 0
    return d


def unwritten(s: Setup) -> torch.Tensor:
    """The kernel wrote nothing: D as the harness filled it (poison; zeros for finalize, which
    red.adds into a D the harness zeroes as TensorRT-LLM does)."""
    if s.inputs.fusion == "finalize":
        return torch.zeros_like(s.correct)
    return poison_output(s.inputs.out_rows, s.inputs.n, s.inputs.out).to(s.correct.dtype)


MUTATIONS: dict[str, Callable[[Setup], torch.Tensor]] = {
    "scaled-1.05": scaled(1.05),
    "scaled-0.99": scaled(0.99),
    "one-garbage-element": garbage(1),
    "100-garbage-elements": garbage(100),
    "neighbour-scale": neighbour_scale,
    "64x128-block-off-by-one-ulp": block_off_by_one_ulp,
    "finalize-stores": lambda s: kernel(s.inputs, store=True),
    "dropped-row": lambda s: kernel(s.inputs, drop_row=s.inputs.total_rows // 2),
    "transposed-b": transposed_b,
    "skipped-last-k-tile": skipped_last_k_tile,
    "small-values-zeroed": small_values_zeroed,
    "unwritten-d": unwritten,
}


def check(s: Setup, d: torch.Tensor, tmp_path: Path) -> NumericsReport:
    """``d`` through the hardware backend's path: d.bin written, read back, compared."""
    (tmp_path / "d.bin").write_bytes(_le_bytes(d.to(output_dtype(s.case.out))))
    return compare(read_output(tmp_path, s.inputs), s.expected)


# ------------------------------------------------------------------------------------------
# The tests


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """The problems are tiny: torch's thread pool would cost more than the work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("fusion", ["none", "finalize"])
@pytest.mark.parametrize("combo", DTYPES, ids=dtype_id)
def test_a_correct_kernel_passes(combo: tuple[str, str, str], fusion: str, tmp_path: Path) -> None:
    s = setup(combo, fusion)
    for order in range(3 if fusion == "finalize" else 1):  # any order of finalize's adds
        report = check(s, kernel(s.inputs, order_seed=order), tmp_path)
        assert report.ok and report.over_bound == 0, report.summary()
        assert report.nonfinite == report.unwritten == 0
    if fusion == "none":  # exact: D is the correctly rounded value, bit for bit
        assert report.exact and report.max_ulp_err <= 0.5 and report.max_bound_ulp == 0
    else:  # within the reduction order's bound; exact in fp32, where no add rounds here
        assert report.max_ulp_err <= report.max_bound_ulp and report.exact == (combo[2] == "fp32")


def escaped_mutations(s: Setup, tmp_path: Path) -> list[str]:
    """The mutations whose D passes the check (with the report), after checking each changes D."""
    escaped, unchanged = [], []
    for name, mutate in MUTATIONS.items():
        if name == "finalize-stores" and s.case.fusion != "finalize":
            continue  # storing instead of reducing is a finalize bug
        d = mutate(s)
        if torch.equal(d.view(torch.uint8), s.correct.view(torch.uint8)):
            unchanged.append(name)
            continue
        report = check(s, d, tmp_path)
        if report.ok or report.over_bound == 0 or "MISMATCH" not in report.summary():
            escaped.append(f"{name}: {report.summary()}")
        if name == "unwritten-d" and s.case.fusion == "none":
            assert report.unwritten == report.total == report.nonfinite, report.summary()
    assert not unchanged, f"mutations that changed nothing: {unchanged}"
    return escaped


@pytest.mark.parametrize("fusion", ["none", "finalize"])
@pytest.mark.parametrize("combo", DTYPES, ids=dtype_id)
def test_every_mutation_fails(combo: tuple[str, str, str], fusion: str, tmp_path: Path) -> None:
    escaped = escaped_mutations(setup(combo, fusion), tmp_path)
    assert not escaped, "mutations that passed the check:\n" + "\n".join(escaped)


@pytest.mark.parametrize("combo", DTYPES, ids=dtype_id)
def test_top8_finalize(combo: tuple[str, str, str], tmp_path: Path) -> None:
    """Every token receives eight rows: a correct kernel passes in any order of its adds, and
    every mutation fails, except one ulp in a block of a 16-bit output, which some order of the
    eight rounded adds can produce (docs/numerics.md, section 4); fp32 outputs are exact."""
    s = setup(combo, "finalize", TOP8)
    for order in range(3):
        report = check(s, kernel(s.inputs, order_seed=order), tmp_path)
        assert report.ok, report.summary()
    escaped = [e for e in escaped_mutations(s, tmp_path) if not e.startswith("64x128-block-off-by-one-ulp")]
    assert not escaped, "mutations that passed the check:\n" + "\n".join(escaped)
    if combo[2] == "fp32":
        assert s.expected.exact
        assert not check(s, block_off_by_one_ulp(s), tmp_path).ok
