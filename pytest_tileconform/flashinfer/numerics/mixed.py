"""SM90's mixed-input MoE GEMM (W4A8 int4, W4A16 MXFP4, fp8 x MXFP4): its weights, their group
scales and the forms FlashInfer's preparation hands them to the kernel in.

Weights are kept as users hold them before FlashInfer's preparation: ``E x N x K/2`` bytes, two
4-bit values per byte (element ``2j`` in the low nibble; int4 as two's complement, MXFP4 as e2m1),
with their scales in a linear layout, ``E x N x K/group`` (bf16 per 128 for int4, ue8m0 bytes per
32 for MXFP4). The harness interleaves the weights itself, with FlashInfer's own kernels; what
FlashInfer's Python side does is done here, as it does it:

* :func:`fold_scales` is ``interleave_moe_scales_for_sm90_mixed_gemm`` (``fused_moe/prepare.py``);
* :func:`humming_offsets` is the e8m0 factorization of
  ``preprocess_moe_weights_for_sm90_mixed_gemm_humming``: the fp8 x MXFP4 kernel takes a 4-bit
  exponent offset per block and folds one residual per expert into each row's token scale.

The reference dequantizes with the true scales (``int4 * s`` and ``e2m1 * 2**(s - 127)``), so a
preparation or a kernel that reads them otherwise fails the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...dtypes import MIXED_INPUT_PAIRS, dtype

#: The exponents of generated group scales: 2**-1, 1 and 2, as the block-scaled types'.
SCALE_EXPONENTS = (-1, 0, 1)
#: ue8m0's zero point: a scale byte ``s`` means ``2 ** (s - 127)``.
UE8M0_BIAS = 127
#: The widest exponent range per expert the fp8 x MXFP4 kernel takes without rewriting the
#: fp4 payload (FlashInfer's ``max_range``: e4m3 exponent code 15 limits it to 11).
HUMMING_MAX_RANGE = 11
#: Humming's fixed compensation FlashInfer asks users to multiply the residual by.
HUMMING_COMPENSATION = 2.0**6


def is_mixed(act: str, weight: str) -> bool:
    """An (act, weight) pair of SM90's mixed-input launcher."""
    return (act, weight) in MIXED_INPUT_PAIRS


def pre_mma(act: str, weight: str) -> bool:
    """fp8 x MXFP4: scales folded into the weights before the MMA, one residual per row."""
    return (act, weight) == ("fp8_e4m3", "mxfp4")


def group_size(weight: str) -> int:
    size = dtype(weight).block_size
    if size is None:
        raise ValueError(f"{weight} has no group scales")
    return size


def check_problem(n: int, k: int, weight: str) -> None:
    """The shapes FlashInfer's preparation takes (a ValueError says which it refuses): the
    scale fold works on 64 x 128 blocks, the weight interleave on 16 x 64."""
    if n % 64 or k % 128:
        raise ValueError(
            f"n={n}, k={k}: FlashInfer's SM90 mixed-input layouts need n % 64 == 0 and "
            "k % 128 == 0 (interleave_moe_scales_for_sm90_mixed_gemm folds 64 x 128 blocks)"
        )
    if k % group_size(weight):
        raise ValueError(f"k={k} is not a multiple of {weight}'s group of {group_size(weight)}")


def random_weights(experts: int, n: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """``E x N x K/2`` bytes of uniformly drawn 4-bit values: every int4 value and every e2m1
    code (-0 included) occurs."""
    return torch.randint(0, 256, (experts, n, k // 2), generator=gen, device=gen.device, dtype=torch.uint8)


def random_scales(experts: int, n: int, k: int, weight: str, gen: torch.Generator) -> torch.Tensor:
    """Power-of-two group scales, linear: bf16 for int4, ue8m0 bytes for MXFP4."""
    low, high = min(SCALE_EXPONENTS), max(SCALE_EXPONENTS)
    shape = (experts, n, k // group_size(weight))
    exponents = torch.randint(low, high + 1, shape, generator=gen, device=gen.device)
    if dtype(weight).scale_format == "bf16":
        return (2.0 ** exponents.to(torch.float32)).to(torch.bfloat16)
    return (exponents + UE8M0_BIAS).to(torch.uint8)


def fold_scales(scales: torch.Tensor, group: int) -> torch.Tensor:
    """FlashInfer's ``interleave_moe_scales_for_sm90_mixed_gemm``: ``E x N x K/group`` scales
    as ``E x N/64 x K/128 x folded_m x physical_cols``, every 64 x 128 block of them in 16-byte
    rows (``physical_cols`` = scales per 16 bytes)."""
    experts, rows, groups = scales.shape
    per_k128 = 128 // group
    physical_cols = 128 // (scales.element_size() * 8)
    m_slices = physical_cols // per_k128
    folded_m = 64 // m_slices
    if rows % 64 or groups % per_k128:
        raise ValueError(f"scales {tuple(scales.shape)}: rows must be a multiple of 64, K of 128")
    k128 = groups // per_k128
    return (
        scales.reshape(experts, rows // 64, m_slices, folded_m, k128, per_k128)
        .permute(0, 1, 4, 3, 2, 5)
        .contiguous()
        .reshape(experts, rows // 64, k128, folded_m, physical_cols)
    )


def humming_offsets(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's e8m0 factorization for the fp8 x MXFP4 kernel
    (``_preprocess_humming_e8m0_weight_scale``): per expert, the 4-bit offset of each block
    from the expert's lowest kept scale and the residual ``2 ** (min - 127) / 2``, so that
    ``fp4 * 2 ** (offset - 6) * residual * 2**6 == fp4 * 2 ** (s - 127)``.

    A range over :data:`HUMMING_MAX_RANGE` would clamp scales and rewrite the fp4 payload,
    which these inputs never need: it is refused."""
    experts = raw.shape[0]
    flat = raw.reshape(experts, -1).to(torch.int32)
    high = flat.max(dim=1, keepdim=True).values
    low = flat.min(dim=1, keepdim=True).values
    if bool(((high - low) > HUMMING_MAX_RANGE).any()):
        raise ValueError(f"an expert's scales span more than {HUMMING_MAX_RANGE} exponents")
    offset = ((flat - low + 1) & 0x0F).to(torch.uint8).reshape(raw.shape)
    residual = torch.exp2(low.squeeze(1).to(torch.float32) - UE8M0_BIAS) * 0.5
    return offset, residual


def token_scales(residual: torch.Tensor, alpha: torch.Tensor | None, rows: Sequence[int]) -> torch.Tensor:
    """The fp8 x MXFP4 kernel's per-row scales, as FlashInfer's runner makes them: each row's
    activation dequantization scale (``alpha`` of its expert here) times its expert's residual
    and Humming's compensation."""
    per_expert = residual.to(torch.float32) * HUMMING_COMPENSATION
    if alpha is not None:
        per_expert = per_expert * alpha.to(torch.float32).to(per_expert.device)
    counts = torch.tensor(list(rows), dtype=torch.int64, device=per_expert.device)
    return torch.repeat_interleave(per_expert, counts)


def kernel_scales(scales: torch.Tensor, act: str, weight: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight scales as the kernel reads them (folded; offsets for fp8 x MXFP4) and, for
    fp8 x MXFP4, the per-expert residuals."""
    if pre_mma(act, weight):
        offsets, residual = humming_offsets(scales)
        return fold_scales(offsets, group_size(weight)), residual
    return fold_scales(scales, group_size(weight)), None
