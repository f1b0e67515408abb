"""Block-scaled element formats (NVFP4, MX): fp4 e2m1 packing, ue8m0 scales, CUTLASS's
swizzled scale layout and TensorRT-LLM's per-expert scale offsets, and dequantization.

Scales are kept in a linear layout (one per block along the last dimension, K) everywhere but in
the files the harness reads, where :func:`swizzle_block_scales` and the offsets give the layout
and positions TensorRT-LLM hands the kernel. UNVERIFIED on hardware: no SM100/SM120 GPU has read
these files yet; the layout follows the sources (Sm1xxBlockScaledConfig, getOffsetActivationSF).
"""

from __future__ import annotations

import torch

#: The scale-factor atom of Sm1xxBlockScaledConfig: 128 rows x 4 scales, 512 bytes.
SF_ATOM_ROWS = 128
SF_ATOM_COLS = 4


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


def unswizzle_block_scales(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`swizzle_block_scales`: the ``rows x cols`` linear scales of the first
    ``pad(rows, 128) * pad(cols, 4)`` bytes of ``flat`` (a kernel's output scales)."""
    r_pad, c_pad = pad_to(rows, SF_ATOM_ROWS), pad_to(cols, SF_ATOM_COLS)
    if flat.dtype != torch.uint8 or flat.numel() < r_pad * c_pad:
        raise ValueError(f"need {r_pad * c_pad} uint8 scale bytes for {rows} x {cols}, got {flat.numel()}")
    r_tiles, c_tiles = r_pad // SF_ATOM_ROWS, c_pad // SF_ATOM_COLS
    t = flat[: r_pad * c_pad].reshape(r_tiles, c_tiles, 32, 4, SF_ATOM_COLS)
    return t.permute(0, 3, 2, 1, 4).reshape(r_pad, c_pad)[:rows, :cols].contiguous()


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


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Two's-complement int4, two per byte (element ``2i`` in the low nibble), to float32
    ``[..., 2K]`` (SM90's W4A8 weights: the launcher reads cutlass::uint4b_t as int4b_t)."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed int4 must be uint8, got {packed.dtype}")
    nibbles = torch.stack((packed & 0x0F, packed >> 4), dim=-1).reshape(*packed.shape[:-1], -1)
    values = nibbles.to(torch.int16)
    return torch.where(values >= 8, values - 16, values).to(torch.float32)


def dequantize_int4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """W4A8 weights to float32: ``int4 * scale``, one (bf16) scale per 128 elements."""
    return _apply_block_scales(unpack_int4(packed), scales.to(torch.float32), 128)


def dequantize_mxfp8(values: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """MXFP8 (e4m3) to float32: ``e4m3 * 2**(ue8m0 - 127)``, one uint8 scale per 32."""
    if values.dtype == torch.uint8:
        values = values.view(torch.float8_e4m3fn)
    return _apply_block_scales(values.to(torch.float32), decode_ue8m0(scales), 32)
