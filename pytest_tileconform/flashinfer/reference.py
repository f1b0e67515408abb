"""Inputs, the run-directory file protocol and a torch reference for one grouped-GEMM case.

The harness computes, for every expert ``e`` and every one of its rows ``r`` (experts' rows
are stored one after the other, expert 0 first)::

    C[r] = alpha_e * A[r] @ B_e^T                      (alpha_e = 1 without alpha.bin)

and writes ``D = C`` (``sum(rows) x N``) without fusion, or with ``finalize``
``D[t] = sum_{r: dest_row[r] == t} router_scales[r] * C[r]`` (``out_rows x N``, rows that
receive nothing stay 0).

Generated values lie on the grid ``{-1.5, -1, ..., 1.5}`` (steps of 0.5), exactly
representable in fp32, fp16, bf16, fp8 e4m3 and fp4 e2m1. Every product is a multiple of
0.25, so an fp32 accumulation is exact in any order while ``|partial sums| < 2**20``, which
holds for ``K`` up to ~460k. The kernel's only rounding is then the alpha/router scaling and
the conversion to the output type, and the fp32 reference here is exact for the GEMM part.

Block-scaled pairs (``nvfp4 x nvfp4``, ``mxfp8 x mxfp4``: the SM120 kernels) are generated
with the same value grid (e2m1 holds it) and power-of-two block scales (nvfp4: e4m3 0.5, 1, 2;
mx: ue8m0 2**-1 .. 2**1), so the reference stays exact. ``GroupedInputs`` keeps their scales
in a linear layout (one per block along K); :func:`write_inputs` writes them in the swizzled
layout and at the per-expert offsets TensorRT-LLM gives the kernel (``a_sf.bin``, ``b_sf.bin``;
see :func:`swizzle_block_scales`). UNVERIFIED on hardware: no SM100/SM120 GPU has run these
files yet; the layout follows the sources (Sm1xxBlockScaledConfig, getOffsetActivationSF).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..dtypes import BLOCK_SCALED_PAIRS, UNSCALED_DTYPES, DType, dtype
from ..matrix.cases import Case

# ------------------------------------------------------------------------------------------
# Element types


#: Input types make_inputs generates (act == weight).
GENERATED_DTYPES = UNSCALED_DTYPES
#: Block-scaled (act, weight) pairs make_inputs generates (the SM120 MoE kernels' inputs).
GENERATED_BLOCK_SCALED = BLOCK_SCALED_PAIRS
#: Types whose GEMM takes a per-expert alpha (per-tensor dequantization scale); for nvfp4
#: this is TensorRT-LLM's product of the two global (decode) scales.
ALPHA_DTYPES = ("fp8_e4m3", "nvfp4")
#: The scale-factor atom of Sm1xxBlockScaledConfig: 128 rows x 4 scales, 512 bytes.
SF_ATOM_ROWS = 128
SF_ATOM_COLS = 4

#: The value grid of generated A and B elements: integers -3..3 times GRID_STEP.
GRID_HALF_WIDTH = 3
GRID_STEP = 0.5
#: Tokens per finalize problem are sized so that a token receives about this many rows.
SIMULATED_TOP_K = 8


def storage_dtype(element: DType) -> torch.dtype:
    """The torch dtype one stored element of ``element`` has (uint8: two packed fp4)."""
    storage = getattr(torch, element.storage)
    assert isinstance(storage, torch.dtype)
    return storage


def output_dtype(name: str) -> torch.dtype:
    """The torch dtype of an output (D) dtype name."""
    return storage_dtype(dtype(name, "output"))


# ------------------------------------------------------------------------------------------
# Dequantization of block-scaled formats (linear scale layout, scales along the last dim)

#: The eight magnitudes of fp4 e2m1 (sign in bit 3 of the nibble).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """fp4 e2m1, two per byte (element ``2i`` in the low nibble), to float32 ``[..., 2K]``."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed e2m1 must be uint8, got {packed.dtype}")
    low = packed & 0x0F
    high = packed >> 4
    nibbles = torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], -1)
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    magnitude = table[(nibbles & 0x07).long()]
    return torch.where((nibbles & 0x08) != 0, -magnitude, magnitude)


def pack_e2m1(values: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`unpack_e2m1` for values exactly on the e2m1 grid (``-6 .. 6``)."""
    if values.shape[-1] % 2:
        raise ValueError("the last dimension must be even to pack two e2m1 values per byte")
    v = values.to(torch.float32)
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=v.device)
    match = v.abs().unsqueeze(-1) == table
    if not bool(match.any(dim=-1).all()):
        raise ValueError("values are not all exactly representable in fp4 e2m1")
    code = match.to(torch.uint8).argmax(dim=-1).to(torch.uint8)
    code = code | torch.where(torch.signbit(v), 0x08, 0x00).to(torch.uint8)
    pairs = code.reshape(*code.shape[:-1], -1, 2)
    return pairs[..., 0] | (pairs[..., 1] << 4)


def decode_ue8m0(scales: torch.Tensor) -> torch.Tensor:
    """ue8m0 scale bytes to float32: ``2 ** (byte - 127)``; byte 0xFF is NaN. Exact."""
    if scales.dtype != torch.uint8:
        raise TypeError(f"ue8m0 scales must be uint8, got {scales.dtype}")
    s = scales.to(torch.int32)
    bits = s << 23  # the byte becomes the fp32 exponent field: 2**(s - 127) for s in 1..254
    bits = torch.where(s == 0, torch.full_like(bits, 0x00400000), bits)  # 2**-127, subnormal
    bits = torch.where(s == 255, torch.full_like(bits, 0x7FC00000), bits)  # NaN
    return bits.view(torch.float32)


def pad_to(value: int, multiple: int) -> int:
    """``value`` rounded up to a multiple of ``multiple``."""
    return -(-value // multiple) * multiple


def swizzle_block_scales(linear: torch.Tensor) -> torch.Tensor:
    """Linear scales ``[rows, K/block]`` (uint8) in CUTLASS's Sm1xxBlockScaledConfig layout
    (``tile_atom_to_shape_SFA/SFB``), flat uint8 of ``pad(rows, 128) * pad(K/block, 4)``.

    The atom is 128 rows x 4 scales (512 bytes): row ``m``, scale ``j`` at
    ``(m % 32) * 16 + ((m // 32) % 4) * 4 + j % 4``; atoms run along K first, then rows.
    Padding is zero.
    """
    if linear.dtype != torch.uint8 or linear.dim() != 2:
        raise TypeError("block scales must be a 2-D uint8 tensor")
    rows, cols = linear.shape
    padded = torch.zeros(pad_to(rows, SF_ATOM_ROWS), pad_to(cols, SF_ATOM_COLS), dtype=torch.uint8)
    padded[:rows, :cols] = linear
    r_tiles, c_tiles = padded.shape[0] // SF_ATOM_ROWS, padded.shape[1] // SF_ATOM_COLS
    # [r_tile, m4 (m // 32 % 4), m32 (m % 32), c_tile, j] -> [r_tile, c_tile, m32, m4, j]
    t = padded.reshape(r_tiles, 4, 32, c_tiles, SF_ATOM_COLS)
    return t.permute(0, 3, 2, 1, 4).reshape(-1).contiguous()


def act_sf_offset(expert: int, rows_before: int, k: int, block: int) -> int:
    """Byte offset of expert ``expert``'s activation scales in the flat buffer: TensorRT-LLM's
    ``getOffsetActivationSF`` (every expert starts on a 128-row boundary)."""
    start = pad_to(rows_before + expert * (SF_ATOM_ROWS - 1), SF_ATOM_ROWS)
    return start * pad_to(k, block * SF_ATOM_COLS) // block


def weight_sf_offset(expert: int, n: int, k: int, block: int) -> int:
    """Byte offset of expert ``expert``'s weight scales: TensorRT-LLM's ``getOffsetWeightSF``."""
    return expert * pad_to(n, SF_ATOM_ROWS) * pad_to(k, block * SF_ATOM_COLS) // block


def _apply_block_scales(values: torch.Tensor, scales: torch.Tensor, block: int) -> torch.Tensor:
    k = values.shape[-1]
    if k % block:
        raise ValueError(f"last dimension {k} is not a multiple of the block size {block}")
    if scales.shape != (*values.shape[:-1], k // block):
        raise ValueError(
            f"scales have shape {tuple(scales.shape)}, expected "
            f"{(*values.shape[:-1], k // block)} (one per {block} elements, linear layout)"
        )
    blocks = values.reshape(*values.shape[:-1], k // block, block)
    return (blocks * scales.unsqueeze(-1)).reshape(values.shape)


def dequantize_nvfp4(
    packed: torch.Tensor, block_scales: torch.Tensor, global_scale: float | torch.Tensor
) -> torch.Tensor:
    """NVFP4 to float32: ``e2m1 * e4m3_block_scale * global_scale``, one scale per 16.

    ``packed`` is uint8 ``[..., K/2]``; ``block_scales`` is ``[..., K/16]`` as float8_e4m3fn
    (or its uint8 bits). ``global_scale`` *multiplies* (a decode scale): FlashInfer's and
    TensorRT-LLM's ``*_gs`` encode scales are its reciprocal.
    """
    if block_scales.dtype == torch.uint8:
        block_scales = block_scales.view(torch.float8_e4m3fn)
    values = unpack_e2m1(packed)
    scales = block_scales.to(torch.float32)
    gs = torch.as_tensor(global_scale, dtype=torch.float32, device=values.device)
    return _apply_block_scales(values, scales, 16) * gs


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """MXFP4 to float32: ``e2m1 * 2**(ue8m0 - 127)``, one uint8 scale per 32 elements."""
    return _apply_block_scales(unpack_e2m1(packed), decode_ue8m0(scales), 32)


def dequantize_mxfp8(values: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """MXFP8 (e4m3) to float32: ``e4m3 * 2**(ue8m0 - 127)``, one uint8 scale per 32."""
    if values.dtype == torch.uint8:
        values = values.view(torch.float8_e4m3fn)
    return _apply_block_scales(values.to(torch.float32), decode_ue8m0(scales), 32)


# ------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, eq=False)
class GroupedInputs:
    """One grouped problem's inputs, as torch tensors in their stored dtypes."""

    act: str  #: activation dtype name
    weight: str  #: weight dtype name
    out: str  #: output dtype name
    fusion: str  #: "none" or "finalize"
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
    #: block-scaled only: B's scales, uint8 bits, ``E x N x K/block`` (linear layout)
    b_sf: torch.Tensor | None = None

    @property
    def experts(self) -> int:
        return len(self.rows_per_expert)

    @property
    def total_rows(self) -> int:
        return sum(self.rows_per_expert)

    def expert_slices(self) -> list[tuple[int, slice]]:
        """``(expert, rows slice)`` for every expert, in storage order (empty ones included)."""
        out: list[tuple[int, slice]] = []
        start = 0
        for e, rows in enumerate(self.rows_per_expert):
            out.append((e, slice(start, start + rows)))
            start += rows
        return out


def _check_generatable(case: Case) -> None:
    if (case.act, case.weight) in GENERATED_BLOCK_SCALED:
        block = dtype(case.weight).block_size
        assert block is not None
        if case.problem.k % block:
            raise ValueError(f"K={case.problem.k} is not a multiple of the scale block {block}")
        output_dtype(case.out)
        if case.fusion not in ("none", "finalize"):
            raise ValueError(f"unknown fusion {case.fusion!r}")
        return
    if case.act != case.weight:
        raise NotImplementedError(
            f"mixed act/weight dtypes ({case.act} x {case.weight}) are not generated yet"
        )
    if case.act not in GENERATED_DTYPES:
        raise NotImplementedError(
            f"inputs of dtype {case.act} are not generated yet (only {', '.join(GENERATED_DTYPES)}"
            f" and the block-scaled pairs {GENERATED_BLOCK_SCALED})"
        )
    output_dtype(case.out)
    if case.fusion not in ("none", "finalize"):
        raise ValueError(f"unknown fusion {case.fusion!r}")


def _grid_values(shape: Sequence[int], gen: torch.Generator) -> torch.Tensor:
    ints = torch.randint(-GRID_HALF_WIDTH, GRID_HALF_WIDTH + 1, tuple(shape), generator=gen)
    return ints.to(torch.float32) * GRID_STEP


def simulate_routing(
    rows_per_expert: Sequence[int], gen: torch.Generator, top_k: int = SIMULATED_TOP_K
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Top-k style routing consistent with the given rows per expert.

    Returns ``(dest_row int32, router_scales float32, out_rows)``. Tokens number
    ``max(max(rows), ceil(sum(rows) / top_k))`` plus about 1/16 more that receive nothing
    (at least one). Each expert sends its rows to distinct tokens, filling the least loaded
    tokens first (ties broken at random), so a token receives at most about ``top_k`` rows,
    each from a different expert. A token's router scales are positive and sum to 1.
    """
    total = sum(rows_per_expert)
    routed = max(max(rows_per_expert, default=0), math.ceil(total / top_k), 1)
    unrouted = max(1, routed // 16)
    out_rows = routed + unrouted
    tokens = torch.randperm(out_rows, generator=gen)[:routed]  # the tokens that get rows
    load = torch.zeros(routed, dtype=torch.int64)
    dest = torch.empty(total, dtype=torch.int64)
    start = 0
    for rows in rows_per_expert:
        if rows == 0:
            continue
        tie = torch.randperm(routed, generator=gen)
        chosen = torch.argsort(load * routed + tie)[:rows]
        load[chosen] += 1
        dest[start : start + rows] = tokens[chosen]
        start += rows
    weights = torch.rand(total, generator=gen) * 0.75 + 0.25  # in [0.25, 1)
    per_token = torch.zeros(out_rows).index_add_(0, dest, weights)
    router = weights / per_token[dest]
    return dest.to(torch.int32), router.to(torch.float32), out_rows


def make_inputs(case: Case, seed: int) -> GroupedInputs:
    """Seeded, deterministic inputs for ``case`` (CPU tensors; the same on every machine)."""
    _check_generatable(case)
    rows = tuple(int(r) for r in case.problem.rows_per_expert)
    n, k = int(case.problem.n), int(case.problem.k)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    total = sum(rows)
    act, weight = dtype(case.act), dtype(case.weight)
    a = _encode(_grid_values((total, k), gen), act)
    b = _encode(_grid_values((len(rows), n, k), gen), weight)
    a_sf = _block_scales((total, k), act, gen)
    b_sf = _block_scales((len(rows), n, k), weight, gen)
    alpha = None
    if case.act in ALPHA_DTYPES:
        # alpha_e = scale_a * scale_b: a mantissa of 1 + j/8 (distinct per expert, so mixing
        # experts' scales shows) over 2**ceil(log2(sqrt(K))) keeps outputs O(1) and alpha *
        # (exact fp32 accumulator) exact in fp32.
        j = torch.randint(0, 8, (len(rows),), generator=gen).to(torch.float32)
        alpha = (1.0 + j / 8.0) * 2.0 ** -math.ceil(math.log2(math.sqrt(k)))
    router = dest = None
    out_rows = total
    if case.fusion == "finalize":
        dest, router, out_rows = simulate_routing(rows, gen)
    return GroupedInputs(
        act=case.act,
        weight=case.weight,
        out=case.out,
        fusion=case.fusion,
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
    )


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
    exponents = torch.randint(-1, 2, (*shape[:-1], shape[-1] // element.block_size), generator=gen)
    if element.scale_format == "ue8m0":
        return (exponents + 127).to(torch.uint8)
    return (2.0 ** exponents.to(torch.float32)).to(torch.float8_e4m3fn).view(torch.uint8)


# ------------------------------------------------------------------------------------------
# The file protocol


def problem_entries(inputs: GroupedInputs) -> dict[str, list[int]]:
    """problem.txt's keys and values; others (timing_iters, ...) may be added to the dict."""
    entries: dict[str, list[int]] = {
        "experts": [inputs.experts],
        "rows": list(inputs.rows_per_expert),
        "n": [inputs.n],
        "k": [inputs.k],
    }
    if inputs.fusion == "finalize":
        entries["out_rows"] = [inputs.out_rows]
    return entries


def format_problem(entries: Mapping[str, int | Sequence[int]]) -> str:
    """problem.txt's text: one ``key value...`` line per entry."""
    lines = []
    for key, value in entries.items():
        values = [value] if isinstance(value, int) else list(value)
        lines.append(" ".join([key, *(str(int(v)) for v in values)]))
    return "\n".join(lines) + "\n"


def _le_bytes(t: torch.Tensor) -> bytes:
    """A tensor's elements as little-endian bytes, on any host."""
    t = t.detach().to("cpu").contiguous()
    size = t.element_size()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    arr = t.view(ints).numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _from_le_bytes(data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    np_ints = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[size]
    arr = np.frombuffer(data, dtype=np.dtype(np_ints).newbyteorder("<")).astype(np_ints)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    return torch.from_numpy(arr.copy()).view(ints).view(dtype).reshape(tuple(shape))


def write_inputs(
    inputs: GroupedInputs,
    run_dir: Path,
    *,
    extra_problem: Mapping[str, int | Sequence[int]] | None = None,
) -> None:
    """Write problem.txt, a.bin, b.bin and, where they apply, alpha.bin, router_scales.bin,
    dest_row.bin, a_sf.bin and b_sf.bin into ``run_dir`` (which must exist).

    ``a_sf.bin`` is TensorRT-LLM's flat activation scale buffer: expert ``e``'s scales,
    swizzled (:func:`swizzle_block_scales`), at :func:`act_sf_offset`, zeros elsewhere;
    ``act_sf_offset(E, sum(rows))`` bytes. ``b_sf.bin`` holds every expert's swizzled weight
    scales at :func:`weight_sf_offset`, ``weight_sf_offset(E, N, K)`` bytes.
    """
    run_dir = Path(run_dir)
    entries: dict[str, int | Sequence[int]] = dict(problem_entries(inputs))
    entries.update(extra_problem or {})
    (run_dir / "problem.txt").write_text(format_problem(entries))
    (run_dir / "a.bin").write_bytes(_le_bytes(inputs.a))
    (run_dir / "b.bin").write_bytes(_le_bytes(inputs.b))
    if inputs.alpha is not None:
        (run_dir / "alpha.bin").write_bytes(_le_bytes(inputs.alpha.to(torch.float32)))
    if inputs.fusion == "finalize":
        if inputs.router_scales is None or inputs.dest_row is None:
            raise ValueError("finalize inputs need router_scales and dest_row")
        (run_dir / "router_scales.bin").write_bytes(_le_bytes(inputs.router_scales.to(torch.float32)))
        (run_dir / "dest_row.bin").write_bytes(_le_bytes(inputs.dest_row.to(torch.int32)))
    if dtype(inputs.act).block_scaled or dtype(inputs.weight).block_scaled:
        a_sf, b_sf = flat_block_scales(inputs)
        (run_dir / "a_sf.bin").write_bytes(_le_bytes(a_sf))
        (run_dir / "b_sf.bin").write_bytes(_le_bytes(b_sf))


def flat_block_scales(inputs: GroupedInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The bytes of ``a_sf.bin`` and ``b_sf.bin`` (see :func:`write_inputs`)."""
    block = dtype(inputs.weight).block_size
    if block is None or inputs.a_sf is None or inputs.b_sf is None:
        raise ValueError("block-scaled inputs need a_sf and b_sf")
    k, n, experts = inputs.k, inputs.n, inputs.experts
    a_flat = torch.zeros(act_sf_offset(experts, inputs.total_rows, k, block), dtype=torch.uint8)
    for e, rows in inputs.expert_slices():
        if rows.stop == rows.start:
            continue
        swizzled = swizzle_block_scales(inputs.a_sf[rows])
        start = act_sf_offset(e, rows.start, k, block)
        a_flat[start : start + swizzled.numel()] = swizzled
    b_flat = torch.zeros(weight_sf_offset(experts, n, k, block), dtype=torch.uint8)
    for e in range(experts):
        swizzled = swizzle_block_scales(inputs.b_sf[e])
        start = weight_sf_offset(e, n, k, block)
        b_flat[start : start + swizzled.numel()] = swizzled
    return a_flat, b_flat


class OutputFileError(ValueError):
    """d.bin is missing or does not have the size the problem implies."""


def read_output(run_dir: Path, case: Case, inputs: GroupedInputs) -> torch.Tensor:
    """d.bin as a float32 ``out_rows x N`` tensor (``out_rows`` = sum(rows) without fusion)."""
    path = Path(run_dir) / "d.bin"
    stored = output_dtype(case.out)
    rows, n = inputs.out_rows, inputs.n
    itemsize = torch.empty((), dtype=stored).element_size()
    expected = rows * n * itemsize
    if not path.is_file():
        raise OutputFileError(f"{path} does not exist: the harness wrote no output")
    data = path.read_bytes()
    if len(data) != expected:
        raise OutputFileError(
            f"{path} has {len(data)} bytes, expected {expected} "
            f"({rows} rows x {n} cols x {itemsize} bytes of {case.out})"
        )
    return _from_le_bytes(data, stored, (rows, n)).to(torch.float32)


# ------------------------------------------------------------------------------------------
# The reference


def dequantize(t: torch.Tensor, dtype_name: str, scales: torch.Tensor | None = None) -> torch.Tensor:
    """A stored operand as float32; block-scaled types need their linear ``scales`` (the
    nvfp4 global scale is not applied here: it is part of alpha)."""
    if not dtype(dtype_name).block_scaled:
        return t.to(torch.float32)
    if scales is None:
        raise ValueError(f"{dtype_name} needs its scale factors")
    if dtype_name == "nvfp4":
        return dequantize_nvfp4(t, scales, 1.0)
    if dtype_name == "mxfp4":
        return dequantize_mxfp4(t, scales)
    return dequantize_mxfp8(t, scales)


def reference_rows(inputs: GroupedInputs) -> torch.Tensor:
    """``alpha_e * A[r] @ B_e^T`` for every permuted row, float32 ``sum(rows) x N``.

    Runs on the device the inputs are on. Experts with no rows are skipped.
    """
    device = inputs.a.device
    out = torch.zeros(inputs.total_rows, inputs.n, dtype=torch.float32, device=device)
    for e, rows in inputs.expert_slices():
        if rows.stop == rows.start:
            continue
        a_sf = None if inputs.a_sf is None else inputs.a_sf[rows]
        b_sf = None if inputs.b_sf is None else inputs.b_sf[e]
        a = dequantize(inputs.a[rows], inputs.act, a_sf)
        b = dequantize(inputs.b[e], inputs.weight, b_sf)
        c = a @ b.T
        if inputs.alpha is not None:
            c = c * inputs.alpha[e].to(device=device, dtype=torch.float32)
        out[rows] = c
    return out


def finalize_rows(rows: torch.Tensor, inputs: GroupedInputs) -> torch.Tensor:
    """Scatter-add ``router_scales[r] * rows[r]`` into row ``dest_row[r]`` of an
    ``out_rows x N`` zero tensor."""
    if inputs.router_scales is None or inputs.dest_row is None:
        raise ValueError("finalize needs router_scales and dest_row")
    device = rows.device
    scaled = rows * inputs.router_scales.to(device=device, dtype=torch.float32).unsqueeze(1)
    out = torch.zeros(inputs.out_rows, inputs.n, dtype=torch.float32, device=device)
    return out.index_add_(0, inputs.dest_row.to(device=device, dtype=torch.int64), scaled)


def reference_output(inputs: GroupedInputs, case: Case) -> torch.Tensor:
    """The expected D in float32: ``out_rows x N`` (``sum(rows) x N`` without fusion)."""
    if (case.act, case.weight, case.fusion) != (inputs.act, inputs.weight, inputs.fusion):
        raise ValueError(f"inputs were made for another case than {case.id}")
    rows = reference_rows(inputs)
    if inputs.fusion == "finalize":
        return finalize_rows(rows, inputs)
    return rows
