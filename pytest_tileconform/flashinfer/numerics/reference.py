"""Inputs, the run-directory file protocol and the exact torch reference of one grouped-GEMM case.

The harness computes, for every expert ``e`` and every one of its rows ``r`` (experts' rows
are stored one after the other, expert 0 first)::

    C[r] = alpha_e * A[r] @ B_e^T                      (alpha_e = 1 without alpha.bin)

and writes ``D = C`` (``sum(rows) x N``) without fusion, or with ``finalize``
``D[t] = sum_{r: dest_row[r] == t} router_scales[r] * (C[r] + bias_e)`` (``out_rows x N``, rows
that receive nothing stay 0; ``bias_e`` only where the problem has a bias: the GEMM has no bias
operand without the finalize epilogue, FlashInfer adds GEMM1's bias in its activation kernel).

The inputs are made so that the reference is exact (docs/numerics.md has the derivation):
values on the grid ``{-1.5, -1, ..., 1.5}`` (exact in every input type, fp4 e2m1 and tf32
included), power-of-two block scales, per-expert alphas of three mantissa bits, router scales
``j/8`` and biases on the grid. Every partial sum of the fp32 accumulation is then a multiple of
a power of two far below fp32's precision, so the kernel's accumulator is exact in any order,
and :func:`expected_output` knows, element by element, what a correct kernel writes (without
fusion, with one row per token) or how far the order of finalize's reduction can move it.

Block-scaled pairs (``nvfp4 x nvfp4``, ``mxfp8 x mxfp4``: the SM120 kernels) keep their scales in
a linear layout (one per block along K); :func:`.runfiles.write_inputs` writes them as TensorRT-LLM hands
them to the kernel (:mod:`.blockscale`). SM90's mixed-input pairs (fp8 x int4, bf16 x mxfp4,
fp8 x mxfp4) draw every 4-bit weight value, with power-of-two group scales, and are written in
the forms FlashInfer's preparation gives them (:mod:`.mixed`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from ...dtypes import BLOCK_SCALED_PAIRS, MIXED_INPUT_PAIRS, UNSCALED_DTYPES, DType, dtype
from ..axes import FUSIONS, MoeCase
from ..configs import d_dtype
from . import activation, mixed
from .blockscale import (
    dequantize_int4,
    dequantize_mxfp4,
    dequantize_mxfp8,
    dequantize_nvfp4,
    pack_e2m1,
)
from .tolerance import Expected, finalize_bound, poison_value, quantum

# ------------------------------------------------------------------------------------------
# Element types and the value grid


#: Input types make_inputs generates (act == weight).
GENERATED_DTYPES = UNSCALED_DTYPES
#: Block-scaled (act, weight) pairs make_inputs generates (the SM120 MoE kernels' inputs).
GENERATED_BLOCK_SCALED = BLOCK_SCALED_PAIRS
#: Types whose GEMM takes a per-expert alpha (per-tensor dequantization scale); for nvfp4
#: this is TensorRT-LLM's product of the two global (decode) scales.
ALPHA_DTYPES = ("fp8_e4m3", "nvfp4")

#: The value grid of generated A, B and bias elements: integers -3..3 times GRID_STEP.
GRID_HALF_WIDTH = 3
GRID_STEP = 0.5
#: Block scales are 2**-1, 1 or 2 (on A and on B).
BLOCK_SCALE_EXPONENTS = (-1, 0, 1)
#: Router scales are j / ROUTER_DENOMINATOR for j in 1..ROUTER_DENOMINATOR: three bits.
ROUTER_DENOMINATOR = 8
#: Tokens per finalize problem are sized so that a token receives about this many rows, where
#: the problem does not say how many tokens its rows were routed from.
SIMULATED_TOP_K = 8


def storage_dtype(element: DType) -> torch.dtype:
    """The torch dtype one stored element of ``element`` has (uint8: two packed fp4)."""
    storage = getattr(torch, element.storage)
    assert isinstance(storage, torch.dtype)
    return storage


def output_dtype(name: str) -> torch.dtype:
    """The torch dtype of an output (D) dtype name."""
    return storage_dtype(dtype(name, "output"))


def d_storage(inputs: GroupedInputs) -> torch.dtype:
    """The torch dtype D is stored in: the output type's, the activation type's with the
    activation fusion (e4m3 bits for an MXFP8 D)."""
    return storage_dtype(dtype(inputs.d))


def poison_output(rows: int, n: int, out: str) -> torch.Tensor:
    """D as the harness leaves it before the kernel runs (without fusion): every byte
    :data:`.tolerance.POISON_BYTE`, in the output dtype (as :func:`.runfiles.read_output` returns D)."""
    return poison_value(output_dtype(out)).expand(rows, n).clone()


def exact_k_limit(act: str, weight: str) -> int:
    """The largest K for which every partial sum of the generated products is exact in fp32.

    A product of grid values is a multiple of ``GRID_STEP**2`` and at most ``(3 * GRID_STEP)**2``
    in magnitude; block scales multiply it by up to ``2**2`` and refine its step by ``2**-2``.
    fp32 holds every multiple of ``q`` below ``2**24 * q``, so ``K * max|product| < 2**24 * q``.
    """
    top = (GRID_HALF_WIDTH * GRID_STEP) ** 2
    step = GRID_STEP**2
    if mixed.is_mixed(act, weight):
        # every 4-bit weight value: int4 up to 8 in steps of 1, e2m1 up to 6 in steps of 1/2
        w_top, w_step = (8.0, 1.0) if weight == "int4" else (6.0, 0.5)
        top = GRID_HALF_WIDTH * GRID_STEP * w_top * 2.0 ** max(mixed.SCALE_EXPONENTS)
        step = GRID_STEP * w_step * 2.0 ** min(mixed.SCALE_EXPONENTS)
    elif dtype(act).block_scaled or dtype(weight).block_scaled:
        spread = 2.0 ** (max(BLOCK_SCALE_EXPONENTS) - min(BLOCK_SCALE_EXPONENTS))
        top, step = top * spread, step / spread
    return math.floor(2**24 * step / top) - 1


# ------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, eq=False)
class GroupedInputs:
    """One grouped problem's inputs, as torch tensors in their stored dtypes (on one device)."""

    act: str  #: activation dtype name
    weight: str  #: weight dtype name
    out: str  #: output dtype name
    fusion: str  #: one of configs.FUSIONS
    rows_per_expert: tuple[int, ...]
    n: int
    k: int
    a: torch.Tensor  #: sum(rows) x K, act storage dtype, expert 0's rows first
    b: torch.Tensor  #: E x N x K, weight storage dtype (out = A @ B_e^T)
    alpha: torch.Tensor | None  #: E float32 per-expert dequant scale (fp8, nvfp4), else None
    router_scales: torch.Tensor | None  #: sum(rows) float32 (finalize), else None
    dest_row: torch.Tensor | None  #: sum(rows) int32 output row per permuted row (finalize)
    out_rows: int  #: rows of D: T for finalize, sum(rows) otherwise
    #: block-scaled only: A's scales, uint8 bits, ``sum(rows) x K/block`` (linear layout)
    a_sf: torch.Tensor | None = None
    #: block-scaled and SM90 mixed input: B's scales, ``E x N x K/block`` (linear layout): uint8
    #: bits, bf16 for int4's groups
    b_sf: torch.Tensor | None = None
    #: finalize with a bias only: E x N in the output dtype (FlashInfer's ``ElementBias``)
    bias: torch.Tensor | None = None
    #: True where every partial sum of A @ B_e^T is exact in fp32 (:func:`make_inputs`' grid);
    #: otherwise the reference accumulates in fp64 and checks that the kernel's fp32 could too
    fp32_exact: bool = False
    #: activation fusion only: ClampedRelu2's limit (FlashInfer's model-wide ``swiglu_limit``)
    clamp_limit: float | None = None
    #: the input family (:mod:`.full`): "exact", or "full" for full-mantissa inputs
    family: str = "exact"

    @property
    def d(self) -> str:
        """D's dtype name (the activation type with the activation fusion)."""
        return d_dtype(self.act, self.out, self.fusion)

    @property
    def experts(self) -> int:
        return len(self.rows_per_expert)

    @property
    def total_rows(self) -> int:
        return sum(self.rows_per_expert)

    @property
    def device(self) -> torch.device:
        return self.a.device

    @property
    def nbytes(self) -> int:
        """Bytes the tensors hold (what an :class:`.prepared.InputCache` entry costs)."""
        parts = (self.alpha, self.router_scales, self.dest_row, self.a_sf, self.b_sf, self.bias)
        return sum(t.numel() * t.element_size() for t in (self.a, self.b, *parts) if t is not None)

    def to(self, device: torch.device | str) -> GroupedInputs:
        """The same inputs on ``device`` (made on the CPU, where they are the same on every
        machine, and checked where D is)."""

        def there(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device)

        return replace(
            self,
            a=self.a.to(device),
            b=self.b.to(device),
            alpha=there(self.alpha),
            router_scales=there(self.router_scales),
            dest_row=there(self.dest_row),
            a_sf=there(self.a_sf),
            b_sf=there(self.b_sf),
            bias=there(self.bias),
        )

    def expert_slices(self) -> list[tuple[int, slice]]:
        """``(expert, rows slice)`` for every expert, in storage order (empty ones included)."""
        out: list[tuple[int, slice]] = []
        start = 0
        for e, rows in enumerate(self.rows_per_expert):
            out.append((e, slice(start, start + rows)))
            start += rows
        return out


def _check_generatable(case: MoeCase) -> None:
    if mixed.is_mixed(case.act, case.weight):
        mixed.check_problem(case.axes.problem.n, case.axes.problem.k, case.weight)
    elif (case.act, case.weight) in GENERATED_BLOCK_SCALED:
        block = dtype(case.weight).block_size
        assert block is not None
        if case.axes.problem.k % block:
            raise ValueError(f"K={case.axes.problem.k} is not a multiple of the scale block {block}")
    elif case.act != case.weight:
        raise NotImplementedError(
            f"mixed act/weight dtypes ({case.act} x {case.weight}) are not generated: the mixed "
            f"pairs are SM90's {', '.join(f'{a} x {w}' for a, w in MIXED_INPUT_PAIRS)}"
        )
    elif case.act not in GENERATED_DTYPES:
        raise NotImplementedError(
            f"inputs of dtype {case.act} are not generated yet (only {', '.join(GENERATED_DTYPES)}"
            f" and the block-scaled pairs {GENERATED_BLOCK_SCALED})"
        )
    output_dtype(case.out)
    if case.axes.fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {case.axes.fusion!r}")
    block = dtype(d_dtype(case.act, case.out, case.axes.fusion)).block_size
    if case.axes.fusion == "activation" and block is not None and case.axes.problem.n % block:
        raise ValueError(f"N={case.axes.problem.n} is not a multiple of the output scale block {block}")
    limit = exact_k_limit(case.act, case.weight)
    if case.axes.problem.k > limit:
        raise ValueError(
            f"K={case.axes.problem.k} is more than {limit}, the largest K whose {case.act} x "
            f"{case.weight} accumulation the generated inputs keep exact in fp32"
        )


def _grid_values(shape: Sequence[int], gen: torch.Generator) -> torch.Tensor:
    # int8 draws are the same numbers as int64 ones (one 32-bit draw each), at an eighth of
    # the memory: B of a prefill-sized problem has billions of elements
    ints = torch.randint(
        -GRID_HALF_WIDTH,
        GRID_HALF_WIDTH + 1,
        tuple(shape),
        generator=gen,
        device=gen.device,
        dtype=torch.int8,
    )
    return ints.to(torch.float32) * GRID_STEP


def routed_tokens(rows_per_expert: Sequence[int], top_k: int, tokens: int | None) -> int:
    """The tokens that receive rows (:func:`simulate_routing`): ``tokens`` when given, else
    ``max(max(rows), ceil(sum(rows) / top_k), 1)``."""
    if tokens is not None:
        return tokens
    return max(max(rows_per_expert, default=0), math.ceil(sum(rows_per_expert) / top_k), 1)


def finalize_out_rows(rows_per_expert: Sequence[int], top_k: int, tokens: int | None) -> int:
    """Rows of a finalize D (:func:`simulate_routing`): ``tokens`` when given, else the routed
    tokens and about 1/16 more (at least one) that receive nothing."""
    routed = routed_tokens(rows_per_expert, top_k, tokens)
    return routed if tokens is not None else routed + max(1, routed // 16)


def simulate_routing(
    rows_per_expert: Sequence[int],
    gen: torch.Generator,
    top_k: int = SIMULATED_TOP_K,
    tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Top-k style routing consistent with the given rows per expert (CPU tensors).

    Returns ``(dest_row int32, router_scales float32, out_rows)``. With ``tokens`` (the batch
    the rows were routed from, ``sum(rows) == tokens * top_k``) every token receives ``top_k``
    rows. Otherwise tokens number ``max(max(rows), ceil(sum(rows) / top_k))`` plus about 1/16
    more that receive nothing (at least one). Each expert sends its rows to distinct tokens,
    filling the least loaded tokens first (ties broken at random), so a token receives at most
    about ``top_k`` rows, each from a different expert. Router scales are ``j/8``, j in 1..8.
    """
    total = sum(rows_per_expert)
    if tokens is not None and max(rows_per_expert, default=0) > tokens:
        raise ValueError(f"an expert has more rows than the {tokens} tokens routed")
    routed = routed_tokens(rows_per_expert, top_k, tokens)
    out_rows = finalize_out_rows(rows_per_expert, top_k, tokens)
    chosen_tokens = torch.randperm(out_rows, generator=gen)[:routed]  # the tokens that get rows
    load = torch.zeros(routed, dtype=torch.int64)
    dest = torch.empty(total, dtype=torch.int64)
    start = 0
    for rows in rows_per_expert:
        if rows == 0:
            continue
        tie = torch.randperm(routed, generator=gen)
        chosen = torch.argsort(load * routed + tie)[:rows]
        load[chosen] += 1
        dest[start : start + rows] = chosen_tokens[chosen]
        start += rows
    steps = torch.randint(1, ROUTER_DENOMINATOR + 1, (total,), generator=gen)
    router = steps.to(torch.float32) / ROUTER_DENOMINATOR
    return dest.to(torch.int32), router, out_rows


def _alphas(experts: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """alpha_e = (1 + j_e/8) / 2**ceil(log2(sqrt(K))): O(1) outputs, three mantissa bits (so
    alpha times the exact accumulator stays exact in fp32), and j_e differs from j_(e-1), so an
    expert that takes its neighbour's alpha is off by at least 1/15."""
    draws = torch.randint(0, 8, (experts,), generator=gen).tolist()
    j: list[int] = []
    for e, d in enumerate(draws):
        j.append(d if e == 0 else (j[-1] + 1 + d % 7) % 8)
    mantissa = 1.0 + torch.tensor(j, dtype=torch.float32) / 8.0
    return mantissa * 2.0 ** -math.ceil(math.log2(math.sqrt(k)))


def make_inputs(case: MoeCase, seed: int, device: torch.device | str | None = None) -> GroupedInputs:
    """Seeded, deterministic inputs for ``case`` on ``device`` (default CPU).

    On the CPU every draw comes from one CPU generator, so the inputs are the same on every
    machine. On another device A, B and the block scales come from that device's generator
    (fast, but its own numbers) and the small parts (alphas, routing, bias) from a CPU one.
    """
    _check_generatable(case)
    problem = case.axes.problem
    rows = tuple(int(r) for r in problem.rows_per_expert)
    n, k = int(problem.n), int(problem.k)
    where = torch.device(device if device is not None else "cpu")
    big = torch.Generator(device=where).manual_seed(int(seed))
    small = big if where.type == "cpu" else torch.Generator(device="cpu").manual_seed(int(seed))
    total = sum(rows)
    act, weight = dtype(case.act), dtype(case.weight)
    a = _encode(_grid_values((total, k), big), act)
    a_sf: torch.Tensor | None
    b_sf: torch.Tensor | None
    if mixed.is_mixed(case.act, case.weight):
        b = mixed.random_weights(len(rows), n, k, big)
        a_sf, b_sf = None, mixed.random_scales(len(rows), n, k, case.weight, big)
    else:
        b = _weights(len(rows), n, k, weight, big)
        a_sf = _block_scales((total, k), act, big)
        b_sf = _block_scales((len(rows), n, k), weight, big)
    alpha = _alphas(len(rows), k, small) if case.act in ALPHA_DTYPES else None
    router = dest = bias = None
    out_rows = total
    if case.axes.fusion == "finalize":
        top_k = problem.top_k if problem.top_k is not None else SIMULATED_TOP_K
        dest, router, out_rows = simulate_routing(rows, small, top_k, problem.tokens)
        if problem.bias:
            bias = _grid_values((len(rows), n), small).to(output_dtype(case.out))

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
        fp32_exact=True,
        clamp_limit=activation.clamp_limit(k) if case.axes.fusion == "activation" else None,
    ).to(where)


def _weights(experts: int, n: int, k: int, element: DType, gen: torch.Generator) -> torch.Tensor:
    """B, one expert at a time (the same draws as all at once, a fraction of the memory)."""
    first = _encode(_grid_values((n, k), gen), element)
    b = torch.empty((experts, *first.shape), dtype=first.dtype, device=first.device)
    b[0] = first
    for e in range(1, experts):
        b[e] = _encode(_grid_values((n, k), gen), element)
    return b


def _encode(values: torch.Tensor, element: DType) -> torch.Tensor:
    """Grid values in ``element``'s storage: packed e2m1 for the fp4 types."""
    storage = storage_dtype(element)
    if storage == torch.uint8 and element.bits == 4:
        return pack_e2m1(values)
    return values.to(storage)


def _block_scales(shape: Sequence[int], element: DType, gen: torch.Generator) -> torch.Tensor | None:
    """Random power-of-two block scales (uint8 bits, linear layout), or None if unscaled."""
    if element.block_size is None:
        return None
    low, high = min(BLOCK_SCALE_EXPONENTS), max(BLOCK_SCALE_EXPONENTS)
    blocks = (*shape[:-1], shape[-1] // element.block_size)
    exponents = torch.randint(low, high + 1, blocks, generator=gen, device=gen.device)
    if element.scale_format == "ue8m0":
        return (exponents + 127).to(torch.uint8)
    return (2.0 ** exponents.to(torch.float32)).to(torch.float8_e4m3fn).view(torch.uint8)


# ------------------------------------------------------------------------------------------
# The reference


def dequantize(t: torch.Tensor, dtype_name: str, scales: torch.Tensor | None = None) -> torch.Tensor:
    """A stored operand as float32; block-scaled types need their linear ``scales`` (the
    nvfp4 global scale is not applied here: it is part of alpha)."""
    if not dtype(dtype_name).block_scaled:
        return t.to(torch.float32)
    if scales is None:
        raise ValueError(f"{dtype_name} needs its scale factors")
    if dtype_name == "int4":
        return dequantize_int4(t, scales)
    if dtype_name == "nvfp4":
        return dequantize_nvfp4(t, scales, 1.0)
    if dtype_name == "mxfp4":
        return dequantize_mxfp4(t, scales)
    return dequantize_mxfp8(t, scales)


class InexactReference(ValueError):
    """The kernel's fp32 epilogue would round these inputs, so no exact D can be predicted."""


def _expert_rows(inputs: GroupedInputs) -> Iterator[tuple[int, slice, torch.Tensor]]:
    """``(expert, rows, alpha_e * A[rows] @ B_e^T)`` (float64, exact) for every expert with
    rows, on the inputs' device: one expert at a time, so a prefill-sized problem never holds
    more than one expert's rows in fp64 beside D."""
    accumulate = torch.float32 if inputs.fp32_exact else torch.float64
    for e, rows in inputs.expert_slices():
        if rows.stop == rows.start:
            continue
        a_sf = None if inputs.a_sf is None else inputs.a_sf[rows]
        b_sf = None if inputs.b_sf is None else inputs.b_sf[e]
        a = dequantize(inputs.a[rows], inputs.act, a_sf).to(accumulate)
        b = dequantize(inputs.b[e], inputs.weight, b_sf).to(accumulate)
        c = (a @ b.T).to(torch.float64)
        if inputs.alpha is not None:
            c = c * inputs.alpha[e].to(torch.float64)
        yield e, rows, c


def reference_rows(inputs: GroupedInputs) -> torch.Tensor:
    """``alpha_e * A[r] @ B_e^T`` for every permuted row, exactly: float64 ``sum(rows) x N``.

    Runs on the inputs' device. The products accumulate in fp32 where the inputs say that is
    exact (then any order, blocking or TF32 gives the same sums: the grid values are exact in
    TF32), in fp64 otherwise. Experts with no rows are skipped (their rows: none).
    """
    out = torch.zeros(inputs.total_rows, inputs.n, dtype=torch.float64, device=inputs.device)
    for _, rows, c in _expert_rows(inputs):
        out[rows] = c
    return out


def _require_fp32(name: str, values: torch.Tensor) -> None:
    if not torch.equal(values.to(torch.float32).to(torch.float64), values):
        raise InexactReference(
            f"{name} is not exact in fp32 for these inputs: the kernel's epilogue would round "
            "it and the reference could not say to what"
        )


def finalize_contributions(inputs: GroupedInputs, expert: int, rows: slice, c: torch.Tensor) -> torch.Tensor:
    """Expert ``expert``'s rows' contributions to their tokens as the finalize epilogue rounds
    them: ``router * (alpha * acc + bias)`` in fp32 (exact here: checked), converted to the
    output type (round to nearest), as float64. ``c`` is ``alpha * acc`` of those rows."""
    if inputs.router_scales is None or inputs.dest_row is None:
        raise ValueError("finalize needs router_scales and dest_row")
    _require_fp32("alpha * accumulator", c)
    if inputs.bias is not None:
        c = c + inputs.bias[expert].to(torch.float64)
        _require_fp32("alpha * accumulator + bias", c)
    scaled = c * inputs.router_scales[rows].to(torch.float64).unsqueeze(1)
    _require_fp32("router scale * (alpha * accumulator + bias)", scaled)
    return scaled.to(torch.float32).to(output_dtype(inputs.out)).to(torch.float64)


def expected_output(inputs: GroupedInputs, case: MoeCase) -> Expected:
    """What a correct kernel writes as D (``out_rows x N``) for ``inputs``, on their device.

    Without fusion: ``alpha * acc`` rounded to fp32 (the epilogue's multiply) and then to the
    output type, exactly. With finalize: the sum of each token's rounded contributions and
    how far the order of their adds can move D (:func:`.tolerance.finalize_bound`). With the
    activation fusion: :func:`.activation.expected_activation`.
    """
    if (case.act, case.weight, case.axes.fusion) != (inputs.act, inputs.weight, inputs.fusion):
        raise ValueError(f"inputs were made for another case than {case.id}")
    out_dtype = output_dtype(inputs.out)
    shape = (inputs.out_rows, inputs.n)
    value = torch.zeros(shape, dtype=torch.float64, device=inputs.device)
    if inputs.fusion == "activation":
        if inputs.clamp_limit is None:
            raise ValueError("the activation fusion needs clamp_limit")
        for _, rows, c in _expert_rows(inputs):
            value[rows] = c
        return activation.expected_activation(value, inputs.clamp_limit, inputs.d)
    if inputs.fusion != "finalize":
        for _, rows, c in _expert_rows(inputs):
            value[rows] = c.to(torch.float32).to(out_dtype).to(torch.float64)
        return Expected(value, None, out_dtype)
    if inputs.dest_row is None:
        raise ValueError("finalize needs dest_row")
    dest = inputs.dest_row.to(dtype=torch.int64)
    abs_sum, abs_max = torch.zeros_like(value), torch.zeros_like(value)
    step = torch.full_like(value, math.inf)
    for e, rows, c in _expert_rows(inputs):
        v = finalize_contributions(inputs, e, rows, c)
        to = dest[rows].unsqueeze(1).expand_as(v)
        value.index_add_(0, dest[rows], v)
        abs_sum.index_add_(0, dest[rows], v.abs())
        abs_max.scatter_reduce_(0, to, v.abs(), "amax")
        step.scatter_reduce_(0, to, quantum(v), "amin")
    fan_in = torch.bincount(dest, minlength=inputs.out_rows)
    bound = finalize_bound(abs_sum, abs_max, fan_in, out_dtype, step)
    return Expected(value, bound, out_dtype, magnitude=abs_sum)


def reference_output(inputs: GroupedInputs, case: MoeCase) -> torch.Tensor:
    """The expected D as float64 (:attr:`Expected.value`); converted to the output type it is a
    D a correct kernel may write."""
    return expected_output(inputs, case).value
