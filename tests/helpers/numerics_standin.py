"""A stand-in for the grouped GEMM kernel, and the wrong kernels the mutation suite
(test_numerics_mutations.py) makes of it.

The stand-in computes D as the GPU does: the products accumulated in fp32 (fp16 for one
mutation), the epilogue's arithmetic in fp32 (``alpha * acc``, ``+ bias``, ``* router``), the
conversion to the output type rounding to nearest, and finalize's red.adds into a zeroed D in a
random order, each add rounding in the output type. A mutation changes one of these steps, or D.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from pytest_tileconform.dtypes import dtype, dtype_label
from pytest_tileconform.flashinfer.axes import MoeAxes, MoeCase
from pytest_tileconform.flashinfer.numerics.blockscale import E2M1_VALUES, decode_ue8m0
from pytest_tileconform.flashinfer.numerics.full import (
    EXACT,
    FAMILIES,
    FULL,
    expected_for,
    make_family_inputs,
)
from pytest_tileconform.flashinfer.numerics.reference import (
    GroupedInputs,
    dequantize,
    output_dtype,
    poison_output,
)
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes
from pytest_tileconform.flashinfer.numerics.tolerance import Expected
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.matrix.cases import Case

TILE = (128, 128, 64)
SEED = 5


def case_for(act: str, weight: str, out: str, fusion: str, problem: Problem) -> MoeCase:
    return Case(
        matrix=Path("mutations.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm90",
        act=act,
        weight=weight,
        out=out,
        dtype_label=dtype_label(act, weight, out),
        tile=TILE,
        axes=MoeAxes(problem=problem, cluster=(1, 1, 1), swap_ab=False, fusion=fusion),
        expectation=None,
        suite=None,
    )


# ------------------------------------------------------------------------------------------
# The kernel


@dataclass(frozen=True)
class Operands:
    """A case's operands as the tensor cores see them (float32, block scales applied)."""

    a: torch.Tensor  #: sum(rows) x K
    b: torch.Tensor  #: E x N x K
    alpha: torch.Tensor | None
    k: int  #: how much of K the kernel accumulates


@dataclass(frozen=True)
class Epilogue:
    """How the kernel accumulates and finishes (the defaults: as a correct kernel does)."""

    fp16_accumulator: bool = False
    #: multiplies each row's ``alpha * acc`` (a wrong global scale, one expert's wrong scale)
    factor: torch.Tensor | float = 1.0
    #: "nearest" (correct), "toward-zero", or "double": the exact epilogue result rounded to
    #: the output type's precision plus DOUBLE_EXTRA_BITS first, then to the output type
    rounding: str = "nearest"
    #: what D holds before the kernel runs: None for the harness's reset (poison, or zeros for
    #: finalize); a stale D otherwise, which the kernel writes over (or reduces into)
    initial: torch.Tensor | None = field(default=None, compare=False)


#: the K of one MMA instruction whose products the fp16-accumulating kernel adds at once
FP16_STEP = 16
#: double rounding: the first rounding keeps this many bits more than the output type
DOUBLE_EXTRA_BITS = 3


def operands(
    inputs: GroupedInputs, e2m1: tuple[float, ...] = E2M1_VALUES, *, pow2_scales: bool = False
) -> Operands:
    """The operands dequantized, by default as a correct kernel reads them (made once per inputs;
    mutations change copies); ``e2m1`` another decode of the fp4 codes, ``pow2_scales`` e4m3
    block scales with their mantissa dropped."""
    if e2m1 == E2M1_VALUES and not pow2_scales:
        return _correct_operands(inputs)
    return _dequantized(inputs, e2m1, pow2_scales)


@functools.cache
def _correct_operands(inputs: GroupedInputs) -> Operands:
    return _dequantized(inputs, E2M1_VALUES, False)


def _dequantized(inputs: GroupedInputs, e2m1: tuple[float, ...], pow2_scales: bool) -> Operands:

    def one(t: torch.Tensor, name: str, scales: torch.Tensor | None) -> torch.Tensor:
        if scales is not None and pow2_scales and dtype(name).scale_format == "e4m3":
            value = scales.view(torch.float8_e4m3fn).to(torch.float32)
            scales = torch.exp2(torch.floor(torch.log2(value))).to(torch.float8_e4m3fn).view(torch.uint8)
        if dtype(name).bits == 4 and e2m1 != E2M1_VALUES:
            return _decode_fp4(t, name, scales, e2m1)
        return dequantize(t, name, scales)

    a = one(inputs.a, inputs.act, inputs.a_sf)
    b = torch.stack(
        [
            one(inputs.b[e], inputs.weight, None if inputs.b_sf is None else inputs.b_sf[e])
            for e in range(inputs.experts)
        ]
    )
    return Operands(a, b, inputs.alpha, inputs.k)


def _decode_fp4(
    packed: torch.Tensor, name: str, scales: torch.Tensor | None, table: tuple[float, ...]
) -> torch.Tensor:
    nibbles = torch.stack((packed & 0x0F, packed >> 4), dim=-1).reshape(*packed.shape[:-1], -1)
    magnitude = torch.tensor(table, dtype=torch.float32)[(nibbles & 0x07).long()]
    values = torch.where((nibbles & 0x08) != 0, -magnitude, magnitude)
    assert scales is not None
    block = dtype(name).block_size
    assert block is not None
    if dtype(name).scale_format == "ue8m0":
        s = decode_ue8m0(scales)
    else:
        s = scales.view(torch.float8_e4m3fn).to(torch.float32)
    return (values.reshape(*values.shape[:-1], -1, block) * s.unsqueeze(-1)).reshape(values.shape)


def expert_of_rows(inputs: GroupedInputs) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(inputs.experts), torch.tensor(inputs.rows_per_expert))


def accumulate(inputs: GroupedInputs, ops: Operands, fp16: bool) -> torch.Tensor:
    """``A[rows] @ B_e^T`` per expert over the first ``ops.k`` of K: fp32 (within the bound of
    docs/numerics.md in any order), or into an fp16 accumulator, FP16_STEP products at a time."""
    acc = torch.zeros(inputs.total_rows, inputs.n)
    for e, rows in inputs.expert_slices():
        a, b = ops.a[rows, : ops.k], ops.b[e, :, : ops.k]
        if not fp16:
            acc[rows] = a @ b.T
            continue
        part = torch.zeros(a.shape[0], inputs.n, dtype=torch.float16)
        for k in range(0, ops.k, FP16_STEP):  # one MMA's K step summed, then added in fp16
            step = a[:, k : k + FP16_STEP] @ b[:, k : k + FP16_STEP].T
            part = (part.float() + step).half()
        acc[rows] = part.float()
    return acc


def epilogue(inputs: GroupedInputs, ops: Operands, how: Epilogue) -> torch.Tensor:
    """Each row's epilogue result (float64): as the kernel's fp32 arithmetic rounds it, or,
    for the "toward-zero" and "double" roundings, exactly (their one rounding comes after)."""
    acc = accumulate(inputs, ops, how.fp16_accumulator).double()
    experts = expert_of_rows(inputs)
    alpha = 1.0 if ops.alpha is None else ops.alpha[experts].double().unsqueeze(1)
    factor = how.factor if isinstance(how.factor, float) else how.factor.double().unsqueeze(1)
    exact = how.rounding != "nearest"

    def fp32(x: torch.Tensor) -> torch.Tensor:
        return x if exact else x.float().double()

    scaled = fp32(acc * alpha * factor)
    if inputs.fusion != "finalize":
        return scaled
    if inputs.bias is not None:
        scaled = fp32(scaled + inputs.bias.double()[experts])  # one fp32 rounding (fma)
    assert inputs.router_scales is not None
    return fp32(scaled * inputs.router_scales.double().unsqueeze(1))


def _precision(out: torch.dtype) -> int:
    return {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}[out]


def round_to_bits(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` (float64) rounded to nearest, ties to even, at ``bits`` significant bits."""
    mantissa, exponent = torch.frexp(x)
    scaled = torch.ldexp(mantissa, torch.full_like(exponent, bits))
    return torch.ldexp(torch.round(scaled), exponent - bits)


def toward_zero(x: torch.Tensor, out: torch.dtype) -> torch.Tensor:
    """``x`` (float64) converted to ``out`` rounding toward zero."""
    near = x.to(out)
    ints = {2: torch.int16, 4: torch.int32}[near.element_size()]
    bits = near.view(ints)
    above = near.double().abs() > x.abs()
    return torch.where(above, bits - 1, bits).view(out)


def convert(y: torch.Tensor, out: torch.dtype, rounding: str) -> torch.Tensor:
    if rounding == "toward-zero":
        return toward_zero(y, out)
    if rounding == "double":
        return round_to_bits(y, _precision(out) + DOUBLE_EXTRA_BITS).to(out)
    return y.to(out)


def kernel(
    inputs: GroupedInputs,
    ops: Operands | None = None,
    how: Epilogue = Epilogue(),
    *,
    order_seed: int = 0,
    store: bool = False,
    drop_row: int | None = None,
) -> torch.Tensor:
    """D as a kernel computing ``ops`` with epilogue ``how`` writes it (in the output dtype)."""
    out = output_dtype(inputs.out)
    v = convert(epilogue(inputs, ops or operands(inputs), how), out, how.rounding)
    if inputs.fusion != "finalize":
        if drop_row is not None:
            v[drop_row] = (
                poison_output(1, inputs.n, inputs.out)[0] if how.initial is None else how.initial[drop_row]
            )
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
    d = torch.zeros(inputs.out_rows, inputs.n, dtype=out) if how.initial is None else how.initial.clone()
    for j in range(int(rank.max()) + 1 if rank.numel() else 0):
        pick = rank == j
        tokens, rows = dest[pick], v[order[pick]]
        # red.add: each add rounds to nearest in the output type (store: the last row wins)
        d[tokens] = rows if store else (d[tokens].float() + rows.float()).to(out)
    return d


# ------------------------------------------------------------------------------------------
# One case, both families


def inputs_in(run_dir: Path, case: MoeCase, seed: int) -> GroupedInputs:
    """The inputs of the family whose A a run directory holds (as a stand-in harness sees them)."""
    a = (run_dir / "a.bin").read_bytes()
    for family in FAMILIES:
        inputs = make_family_inputs(case, seed, family)
        if _le_bytes(inputs.a) == a:
            return inputs
    raise AssertionError(f"{run_dir} holds the inputs of no family")


@dataclass(frozen=True)
class Setup:
    case: MoeCase
    inputs: GroupedInputs
    expected: Expected
    correct: torch.Tensor  #: a correct kernel's D (output dtype)


@functools.cache
def setup(combo: tuple[str, str, str], fusion: str, problem: Problem, family: str = EXACT) -> Setup:
    case = case_for(*combo, fusion, problem)
    inputs = make_family_inputs(case, SEED, family)
    return Setup(case, inputs, expected_for(inputs, case), kernel(inputs))


def other_family(s: Setup) -> Setup:
    family = FULL if s.inputs.family == EXACT else EXACT
    combo = (s.case.act, s.case.weight, s.case.out)
    return setup(combo, s.case.axes.fusion, s.case.axes.problem, family)


# ------------------------------------------------------------------------------------------
# The mutations: each returns the wrong kernel's D, or None where it does not apply to the
# case's types (the reason is in NOT_APPLICABLE)

Mutation = Callable[[Setup], "torch.Tensor | None"]


def neighbour_expert(inputs: GroupedInputs) -> int:
    """The first expert with rows that has a next expert: it takes that one's scale."""
    return next(e for e, r in enumerate(inputs.rows_per_expert[:-1]) if r)


def with_bits(d: torch.Tensor, change: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    ints = {2: torch.int16, 4: torch.int32}[d.element_size()]
    return change(d.view(ints).clone()).view(d.dtype)


def scaled(factor: float) -> Mutation:
    return lambda s: (s.correct.double() * factor).to(s.correct.dtype)


def garbage(count: int) -> Mutation:
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


def e4m3_operands(s: Setup) -> torch.Tensor:
    """A and B (block scales applied) converted to fp8 e4m3 before the MMA."""
    ops = operands(s.inputs)

    def e4m3(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float8_e4m3fn).to(torch.float32)

    return kernel(s.inputs, replace(ops, a=e4m3(ops.a), b=e4m3(ops.b)))


def reduced_alpha(to: torch.dtype) -> Mutation:
    """alpha (the per-expert dequantization scale; nvfp4: the global scales' product) held in
    ``to``."""

    def mutate(s: Setup) -> torch.Tensor | None:
        ops = operands(s.inputs)
        if ops.alpha is None:
            return None
        return kernel(s.inputs, replace(ops, alpha=ops.alpha.to(to).to(torch.float32)))

    return mutate


#: e2m1 codes 4-7 decoded as the fixed point codes 0-3 are (0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5)
LINEAR_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5)


def wrong_e2m1(s: Setup) -> torch.Tensor | None:
    if dtype(s.case.act).bits != 4 and dtype(s.case.weight).bits != 4:
        return None
    return kernel(s.inputs, operands(s.inputs, LINEAR_E2M1))


def pow2_block_scales(s: Setup) -> torch.Tensor | None:
    """The e4m3 block scales' mantissa ignored (each scale taken as its power of two)."""
    if "e4m3" not in (dtype(s.case.act).scale_format, dtype(s.case.weight).scale_format):
        return None
    return kernel(s.inputs, operands(s.inputs, pow2_scales=True))


def global_scale(factor: float) -> Mutation:
    return lambda s: kernel(s.inputs, how=Epilogue(factor=factor))


def hot_expert(s: Setup) -> torch.Tensor:
    """The expert with the most rows computes 1% high (its scale, say)."""
    rows = s.inputs.rows_per_expert
    hot = max(range(len(rows)), key=lambda e: rows[e])
    factor = (expert_of_rows(s.inputs) == hot).double() * 0.01 + 1.0
    return kernel(s.inputs, how=Epilogue(factor=factor))


def stale_d(s: Setup) -> torch.Tensor:
    """D still holds the previous case's (the same problem's other input family): without
    fusion the kernel writes none of it; finalize reduces into it instead of a zeroed D."""
    previous = other_family(s).correct
    if s.inputs.fusion != "finalize":
        return previous.clone()
    return kernel(s.inputs, how=Epilogue(initial=previous))


MUTATIONS: dict[str, Mutation] = {
    "scaled-1.05": scaled(1.05),
    "scaled-0.99": scaled(0.99),
    "one-garbage-element": garbage(1),
    "100-garbage-elements": garbage(100),
    "neighbour-scale": neighbour_scale,
    "64x128-block-off-by-one-ulp": block_off_by_one_ulp,
    "finalize-stores": lambda s: kernel(s.inputs, store=True) if s.inputs.fusion == "finalize" else None,
    "dropped-row": lambda s: kernel(s.inputs, drop_row=s.inputs.total_rows // 2),
    "transposed-b": transposed_b,
    "skipped-last-k-tile": skipped_last_k_tile,
    "small-values-zeroed": small_values_zeroed,
    "unwritten-d": unwritten,
    "fp16-accumulation": lambda s: kernel(s.inputs, how=Epilogue(fp16_accumulator=True)),
    "e4m3-operands": e4m3_operands,
    "bf16-alpha": reduced_alpha(torch.bfloat16),
    "fp16-alpha": reduced_alpha(torch.float16),
    "e2m1-codes-4-7-linear": wrong_e2m1,
    "block-scale-mantissa-ignored": pow2_block_scales,
    "double-rounding": lambda s: kernel(s.inputs, how=Epilogue(rounding="double")),
    "global-scale-0.999": global_scale(0.999),
    "global-scale-1.001": global_scale(1.001),
    "hot-expert-1.01": hot_expert,
    "round-toward-zero": lambda s: kernel(s.inputs, how=Epilogue(rounding="toward-zero")),
    "stale-d": stale_d,
}
