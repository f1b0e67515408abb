"""The full-mantissa input family: inputs whose every part carries the precision its format has,
and the interval a correct kernel's D lies in (docs/numerics.md, "The full family").

The exact family (:func:`.reference.make_inputs`) makes D exactly predictable, so it catches
layout and indexing bit for bit, but its values have at most two significant bits: a kernel that
loses low-order precision (fp16 accumulation, a bf16 alpha, an e2m1 code decoded wrong, a scale
off by 0.1%) writes the same D. This family draws

* A and B with every mantissa bit of their type (TF32's ten for fp32, which SM90 multiplies in
  TF32), each row of A and of B_e within one binade, the binades ``2**-2 .. 2**1`` across rows;
  all 16 e2m1 codes for fp4; B's elements zero with probability ``1 - DOT_NONZEROS / K``, so an
  output element sums about :data:`DOT_NONZEROS` non-zero products at any K;
* NVFP4 block scales as e4m3 with all three mantissa bits, MX ue8m0 scales (no mantissa) over
  five binades;
* alphas, router scales and biases with 24 significant bits; alphas sit next to a bf16 and an
  fp16 rounding boundary, so holding one in either type moves it by about 2^-8 or 2^-11.

The kernel's accumulator is then not exact: :func:`expected_full` bounds it (per element, any
order, any blocking) and carries the interval through the epilogue's fp32 roundings, which are
monotone, to the output type; finalize adds the reduction order's bound
(:func:`.tolerance.finalize_bound`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ...dtypes import dtype
from ..axes import MoeCase
from .reference import (
    ALPHA_DTYPES,
    SIMULATED_TOP_K,
    GroupedInputs,
    _check_generatable,
    dequantize,
    expected_output,
    make_inputs,
    output_dtype,
    simulate_routing,
    storage_dtype,
)
from .tolerance import Expected, finalize_bound, quantum, ulp

EXACT, FULL = "exact", "full"
#: The input families every case is judged on, in the order they run.
FAMILIES = (EXACT, FULL)
#: Non-zero products an output element sums, on average: B's density is DOT_NONZEROS / K.
DOT_NONZEROS = 64
#: The binades rows of A and B lie in: (1 + fraction) * 2**e.
ROW_EXPONENTS = (-2, -1, 0, 1)
#: e4m3 block scales: (1 + m/8) * 2**e; ue8m0 block scales: 2**e.
E4M3_SCALE_EXPONENTS = (-2, -1, 0, 1)
UE8M0_SCALE_EXPONENTS = (-2, -1, 0, 1, 2)
#: Fraction bits the tensor cores multiply A and B with: fp32 runs on TF32 (ten).
FRACTION_BITS = {"bf16": 7, "fp16": 10, "fp32": 10, "fp8_e4m3": 3, "mxfp8": 3}
#: Significant bits of the kernel's accumulator: fp32's 24, except SM90's FP8 kernels, whose
#: fast accumulation keeps 14 (an e8m13 accumulator that truncates: DeepSeek-V3's measurement
#: on H800, Khattak and Mikaitis's model of H100).
FP32_BITS = 24
FP8_FAST_ACCUMULATION_BITS = 14
#: The relative amount the reference's fp64 arithmetic is widened by at each epilogue step, so
#: that its roundings (fp64, then fp32) can never land inside the kernel's interval.
_WIDEN = 2.0**-50


def accumulator_bits(act: str) -> int:
    """Significant bits the kernel's accumulator keeps (see :data:`FP8_FAST_ACCUMULATION_BITS`)."""
    return FP8_FAST_ACCUMULATION_BITS if act == "fp8_e4m3" else FP32_BITS


def check_generatable(case: MoeCase) -> None:
    """What :func:`make_full_inputs` refuses (a NotImplementedError or ValueError says why)."""
    _check_generatable(case)
    if dtype(case.weight).block_scaled and not dtype(case.act).block_scaled:
        raise NotImplementedError(
            f"the full family is not generated for SM90's mixed input ({case.act} x {case.weight})"
        )
    if case.axes.fusion == "activation":
        raise NotImplementedError("the full family is not generated for the activation fusion")


# ------------------------------------------------------------------------------------------
# Inputs


def _signs(shape: Sequence[int], gen: torch.Generator) -> torch.Tensor:
    bits = torch.randint(0, 2, tuple(shape), generator=gen, device=gen.device, dtype=torch.int8)
    return 1.0 - 2.0 * bits.to(torch.float32)


def _row_binade_values(shape: Sequence[int], fraction_bits: int, gen: torch.Generator) -> torch.Tensor:
    """``±(1 + f / 2**fraction_bits) * 2**e_row``, f uniform over every fraction, e_row one of
    :data:`ROW_EXPONENTS` per row (the last dimension is a row)."""
    shape = tuple(shape)
    fraction = torch.randint(
        0, 1 << fraction_bits, shape, generator=gen, device=gen.device, dtype=torch.int32
    )
    exps = torch.tensor(ROW_EXPONENTS, dtype=torch.float32, device=gen.device)
    pick = torch.randint(0, len(ROW_EXPONENTS), (*shape[:-1], 1), generator=gen, device=gen.device)
    binade = torch.exp2(exps[pick])
    return _signs(shape, gen) * (1.0 + fraction.to(torch.float32) / float(1 << fraction_bits)) * binade


def _sparse(values: torch.Tensor, density: float, gen: torch.Generator) -> torch.Tensor:
    if density >= 1:
        return values
    keep = torch.rand(values.shape, generator=gen, device=gen.device) < density
    return torch.where(keep, values, torch.zeros_like(values))


def _e2m1_codes(shape: Sequence[int], density: float, gen: torch.Generator) -> torch.Tensor:
    """Packed fp4: every one of the 16 codes (±0 included) equally likely where kept."""
    shape = tuple(shape)
    codes = torch.randint(0, 16, shape, generator=gen, device=gen.device, dtype=torch.uint8)
    if density < 1:
        keep = torch.rand(shape, generator=gen, device=gen.device) < density
        codes = torch.where(keep, codes, torch.zeros_like(codes))
    pairs = codes.reshape(*shape[:-1], -1, 2)
    return pairs[..., 0] | (pairs[..., 1] << 4)


def _operand(shape: Sequence[int], name: str, density: float, gen: torch.Generator) -> torch.Tensor:
    element = dtype(name)
    if element.bits == 4:
        return _e2m1_codes(shape, density, gen)
    values = _sparse(_row_binade_values(shape, FRACTION_BITS[name], gen), density, gen)
    return values.to(storage_dtype(element))


def _block_scales(shape: Sequence[int], name: str, gen: torch.Generator) -> torch.Tensor | None:
    element = dtype(name)
    if element.block_size is None:
        return None
    blocks = (*shape[:-1], shape[-1] // element.block_size)
    if element.scale_format == "ue8m0":
        low, high = min(UE8M0_SCALE_EXPONENTS), max(UE8M0_SCALE_EXPONENTS)
        exps = torch.randint(low, high + 1, blocks, generator=gen, device=gen.device)
        return (exps + 127).to(torch.uint8)
    low, high = min(E4M3_SCALE_EXPONENTS), max(E4M3_SCALE_EXPONENTS)
    exps = torch.randint(low, high + 1, blocks, generator=gen, device=gen.device).to(torch.float32)
    mantissa = torch.randint(0, 8, blocks, generator=gen, device=gen.device).to(torch.float32)
    return ((1 + mantissa / 8) * torch.exp2(exps)).to(torch.float8_e4m3fn).view(torch.uint8)


def _full_precision(count: int, gen: torch.Generator, low: float, high: float) -> torch.Tensor:
    """fp32 values in ``[low, high)`` with 24 significant bits (the last one set)."""
    u = torch.rand(count, generator=gen, dtype=torch.float64)
    x = (low + (high - low) * u).to(torch.float32)
    bits = x.view(torch.int32) | 1
    return bits.view(torch.float32)


def full_alphas(experts: int, gen: torch.Generator) -> torch.Tensor:
    """``(1 + f) / 8`` with 24 significant bits, f's bits 2^-8 and 2^-11 set and 2^-9, 2^-10,
    2^-12 clear: bf16 (7 fraction bits) rounds it by 2^-8 - 2^-11 or more, fp16 (10) by
    2^-11 - 2^-12 or more, relative to 1 + f; consecutive experts differ."""
    raw = _full_precision(experts, gen, 1.0, 2.0).view(torch.int32)
    keep = ~((1 << (23 - 8)) | (1 << (23 - 9)) | (1 << (23 - 10)) | (1 << (23 - 11)) | (1 << (23 - 12)))
    raw = (raw & keep) | (1 << (23 - 8)) | (1 << (23 - 11))
    return raw.view(torch.float32) / 8


def make_full_inputs(case: MoeCase, seed: int, device: torch.device | str | None = None) -> GroupedInputs:
    """The full family's inputs for ``case`` (seeded; drawn like :func:`.reference.make_inputs`:
    A, B and block scales from ``device``'s generator, the small parts from a CPU one)."""
    check_generatable(case)
    problem = case.axes.problem
    rows = tuple(int(r) for r in problem.rows_per_expert)
    n, k = int(problem.n), int(problem.k)
    where = torch.device(device if device is not None else "cpu")
    big = torch.Generator(device=where).manual_seed(int(seed) ^ 0x5F11)
    small = big if where.type == "cpu" else torch.Generator(device="cpu").manual_seed(int(seed) ^ 0x5F11)
    total, experts = sum(rows), len(rows)
    density = min(1.0, DOT_NONZEROS / k)
    a = _operand((total, k), case.act, 1.0, big)
    first = _operand((n, k), case.weight, density, big)
    b = torch.empty((experts, *first.shape), dtype=first.dtype, device=where)
    b[0] = first
    for e in range(1, experts):  # one expert at a time: a fraction of the memory
        b[e] = _operand((n, k), case.weight, density, big)
    a_sf = _block_scales((total, k), case.act, big)
    b_sf = _block_scales((experts, n, k), case.weight, big)
    alpha = full_alphas(experts, small) if case.act in ALPHA_DTYPES else None
    router = dest = bias = None
    out_rows = total
    if case.axes.fusion == "finalize":
        top_k = problem.top_k if problem.top_k is not None else SIMULATED_TOP_K
        dest, _, out_rows = simulate_routing(rows, small, top_k, problem.tokens)
        router = _full_precision(total, small, 0.125, 1.0)
        if problem.bias:
            values = _row_binade_values((experts, n), 23, small).to(torch.float64)
            bias = values.to(output_dtype(case.out))
    return GroupedInputs(
        act=case.act,
        weight=case.weight,
        out=case.out,
        fusion=case.axes.fusion,
        rows_per_expert=rows,
        n=n,
        k=k,
        a=a,
        b=b,
        alpha=alpha,
        router_scales=router,
        dest_row=dest,
        out_rows=out_rows,
        a_sf=a_sf,
        b_sf=b_sf,
        bias=bias,
        family=FULL,
    ).to(where)


def make_family_inputs(
    case: MoeCase, seed: int, family: str, device: torch.device | str | None = None
) -> GroupedInputs:
    """``family``'s inputs for ``case``."""
    if family == EXACT:
        return make_inputs(case, seed, device)
    if family == FULL:
        return make_full_inputs(case, seed, device)
    raise ValueError(f"unknown input family {family!r} (known: {', '.join(FAMILIES)})")


# ------------------------------------------------------------------------------------------
# The expected D


def _row_quanta(values: torch.Tensor) -> torch.Tensor:
    """Per row, the largest power of two dividing every element (inf for an all-zero row)."""
    return quantum(values.to(torch.float64)).amin(dim=-1)


def accumulation_interval(
    inputs: GroupedInputs, expert: int, rows: slice
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(acc, bound)`` for expert ``expert``'s rows (float64 ``rows x N``): :func:`dot_interval`
    of the rows' dequantized A and the expert's dequantized B."""
    a_sf = None if inputs.a_sf is None else inputs.a_sf[rows]
    b_sf = None if inputs.b_sf is None else inputs.b_sf[expert]
    a = dequantize(inputs.a[rows], inputs.act, a_sf)
    b = dequantize(inputs.b[expert], inputs.weight, b_sf)
    return dot_interval(a, b, accumulator_bits(inputs.act))


def dot_interval(a: torch.Tensor, b: torch.Tensor, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(acc, bound)`` of ``a @ b.T`` (float64 ``rows x cols``; ``a`` is rows x K, ``b`` cols x K,
    the values the tensor cores multiply): the exact sum of the products to within the
    reference's own error, and how far any correct kernel's ``p``-bit accumulator and the
    reference together can be from it.

    Each element sums at most ``m`` non-zero products (``m`` = the smaller count of non-zeros of
    its row of A and of B), each a multiple of ``Q`` (the product of those rows' quanta), of
    magnitudes adding to ``S``. Adding 0 is exact. An add of ``k >= 2`` non-zero p-bit operands
    that aligns them to the largest and truncates (a tensor core), then truncates the sum to p
    bits, loses less than ``k + 1`` units of ``2**(1 - p) S`` (no operand, no result exceeds
    ``S``); such an add merges k running sums into one, so over all adds ``sum (k - 1) <= m - 1``
    and ``sum (k + 1) <= 3 (m - 1)``: ``|acc - sum| <= 3 m 2**(1 - p) S``. Where ``S < 2**p Q``
    every partial sum is representable and the accumulator is exact (bound 0)."""
    accumulate = torch.float64 if a.device.type == "cpu" else torch.float32
    acc = (a.to(accumulate) @ b.to(accumulate).T).to(torch.float64)
    total = (a.abs().to(accumulate) @ b.abs().to(accumulate).T).to(torch.float64)
    q = _row_quanta(a).unsqueeze(1) * _row_quanta(b).unsqueeze(0)
    m = torch.minimum((a != 0).sum(dim=1).unsqueeze(1), (b != 0).sum(dim=1).unsqueeze(0)).to(torch.float64)
    # the reference's own sums: fp64 on the CPU, fp32 on a GPU; |A| |B|^T too, so S is raised
    # by more than its own rounding could have lowered it
    ref_bits = 53 if accumulate == torch.float64 else FP32_BITS
    total = total * (1 + m * 2.0 ** (1 - ref_bits))
    ref = torch.where(total < q * 2.0**ref_bits, 0.0, 2 * m * 2.0 ** (1 - ref_bits) * total)
    kernel = torch.where(total < q * 2.0**p, 0.0, 3 * m * 2.0 ** (1 - p) * total)
    return acc, kernel + ref


def output_interval(acc: torch.Tensor, bound: torch.Tensor, out: torch.dtype) -> Expected:
    """What a correct kernel writes for accumulators within ``bound`` of ``acc`` when its
    epilogue is the identity in fp32 (alpha 1, no bias): each end rounded to fp32 outward, then
    to the output type (both roundings monotone)."""
    low = _fp32(acc - bound, up=False).to(out).to(torch.float64)
    high = _fp32(acc + bound, up=True).to(out).to(torch.float64)
    return Expected((low + high) / 2, (high - low) / 2, out)


def _widened(x: torch.Tensor, up: bool) -> torch.Tensor:
    return x + x.abs() * (_WIDEN if up else -_WIDEN)


def _fp32(x: torch.Tensor, up: bool) -> torch.Tensor:
    """The kernel's fp32 rounding of a value the reference knows to fp64's precision, taken
    outward (rounding to nearest is monotone)."""
    return _widened(x, up).to(torch.float32).to(torch.float64)


def epilogue_ends(
    inputs: GroupedInputs, expert: int, rows: slice, acc: torch.Tensor, up: bool
) -> torch.Tensor:
    """The end (``up``: upper) of what the epilogue's fp32 result can be for accumulators up to
    ``acc``: ``alpha * acc`` without fusion; with finalize ``router * (alpha * acc + bias)``,
    the sum fused or not (whichever reaches further). Every step is monotone in acc (alpha and
    the router scales are positive)."""
    alpha = 1.0 if inputs.alpha is None else float(inputs.alpha[expert])
    scaled = _widened(acc * alpha, up)
    if inputs.fusion != "finalize":
        return scaled.to(torch.float32).to(torch.float64)
    assert inputs.router_scales is not None
    bias = 0.0 if inputs.bias is None else inputs.bias[expert].to(torch.float64).unsqueeze(0)
    router = inputs.router_scales[rows].to(torch.float64).unsqueeze(1)
    rounded = _fp32(_fp32(scaled, up) + bias, up)
    fused = _fp32(scaled + bias, up)
    pick = torch.maximum if up else torch.minimum
    return pick(_fp32(rounded * router, up), _fp32(fused * router, up))


def expected_full(inputs: GroupedInputs, case: MoeCase) -> Expected:
    """The interval of D a correct kernel writes for the full family's ``inputs`` (on their
    device): without fusion each element between the output-type roundings of the epilogue's
    ends; with finalize each contribution so, and their sum within the reduction's bound."""
    if inputs.family != FULL:
        raise ValueError("expected_full takes the full family's inputs")
    if (case.act, case.weight, case.axes.fusion) != (inputs.act, inputs.weight, inputs.fusion):
        raise ValueError(f"inputs were made for another case than {case.id}")
    out = output_dtype(inputs.out)
    shape = (inputs.out_rows, inputs.n)
    low = torch.zeros(shape, dtype=torch.float64, device=inputs.device)
    high = torch.zeros_like(low)
    finalize = inputs.fusion == "finalize"
    if finalize:
        assert inputs.dest_row is not None
        dest = inputs.dest_row.to(dtype=torch.int64)
        abs_sum, abs_max = torch.zeros_like(low), torch.zeros_like(low)
        step = torch.full_like(low, math.inf)
    for e, rows in inputs.expert_slices():
        if rows.stop == rows.start:
            continue
        acc, bound = accumulation_interval(inputs, e, rows)
        lo = epilogue_ends(inputs, e, rows, acc - bound, up=False).to(out).to(torch.float64)
        hi = epilogue_ends(inputs, e, rows, acc + bound, up=True).to(out).to(torch.float64)
        if not finalize:
            low[rows], high[rows] = lo, hi
            continue
        to = dest[rows]
        low.index_add_(0, to, lo)
        high.index_add_(0, to, hi)
        magnitude = torch.maximum(lo.abs(), hi.abs())
        abs_sum.index_add_(0, to, magnitude)
        abs_max.scatter_reduce_(0, to.unsqueeze(1).expand_as(lo), magnitude, "amax")
        # every value in [lo, hi] is a multiple of the spacing at its smaller magnitude
        inner = torch.where(lo * hi > 0, torch.minimum(lo.abs(), hi.abs()), 0.0)
        grain = torch.where(lo == hi, quantum(lo), torch.minimum(quantum(lo), ulp(inner, out)))
        step.scatter_reduce_(0, to.unsqueeze(1).expand_as(lo), grain, "amin")
    value, half = (low + high) / 2, (high - low) / 2
    if not finalize:
        return Expected(value, half, out)
    fan_in = torch.bincount(dest, minlength=inputs.out_rows)
    bound = half + finalize_bound(abs_sum, abs_max, fan_in, out, step)
    return Expected(value, bound, out, magnitude=abs_sum)


def expected_for(inputs: GroupedInputs, case: MoeCase) -> Expected:
    """What a correct kernel writes for ``inputs`` of either family."""
    return expected_full(inputs, case) if inputs.family == FULL else expected_output(inputs, case)
