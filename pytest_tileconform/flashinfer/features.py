"""What a FlashInfer release declares that the harness and the generated unit use, read from that
release's own sources (never assumed from the newest).

Releases from 0.5.3 on share the uniform launcher's 17-parameter macro (:mod:`.compat`), but
other pieces come and go:

- ``TmaWarpSpecializedGroupedGemmInput::fused_activation_epilogue`` and
  ``EpilogueFusion::ACTIVATION`` (the SM10x activation fusion) exist only in newer releases;
- the SM90 mixed-input launcher (``moe_gemm_tma_ws_mixed_input_launcher.inl``) declares its own
  ``SafeFP4`` alias only in some releases (the others' generator names ``__nv_fp4_e2m1``), and
  only some have the precomputed tile scheduler, the small-K launcher, the pre-MMA ue8m0 scale
  mode and each of the weight interleave kernels (``moe_gemm_mixed_utils.cu``);
- two layouts of the mixed launcher's inputs change with its generation, and the harness makes
  each where the release's sources say so (``harness_mixed.h``): the group scales packed CTA_K /
  group to an element (``ElementScalePacked``, with ``PackedScalesNum = get<2>(CTAShape{}) /
  group_size``; 0.6.15 and older and 0.6.17) or one per element, folded (0.6.16 on); B read
  through LDSM as FlashInfer's interleave kernels lay it out (the mainloop's ``copy_tensors_A``,
  0.6.12 on) or as stored (``copy_tensors_MK``, 0.5.3 - 0.6.6, which have no interleave
  kernels). Given the folded scales, 0.6.12's W4A8 and W4A16 kernels wrote a D wrong in almost
  every element on the H200: the harness's doing, which is why it is read, never assumed. Made
  as 0.6.12's own sources say (packed scales, B through its interleave kernels), its kernels match
  bit for bit on every tile its heuristic runs; the CTA M 128 pingpong ones it generates but never
  selects fail by themselves, a verdict on the kernel (results/releases/h200-2026-12-02-mixed-0612).

:func:`release_features` reads these facts once per sources directory; :func:`harness_defines`
tells the harness which of its code paths exist; :func:`missing_piece` says, before anything is
compiled, which piece a configuration needs that the release lacks, so the tool reports its own
limitation instead of compiling a unit that cannot build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..archs import arch_name
from .configs import SMALL_K_MAINLOOPS, KernelConfig, pre_mma_scales
from .sources import LAUNCHER_INL, MIXED_LAUNCHER_INL, MIXED_UTILS_CU

#: The GEMM input struct's header, relative to ``csrc/nv_internal``
GEMM_INPUT_H = "tensorrt_llm/kernels/cutlass_kernels/include/moe_gemm_kernels.h"
#: FlashInfer's weight interleave kernel for each mixed pair (the harness's ``C::interleave``:
#: 0 int4 for W4A8, 1 fp4 for 16-bit activations, 2 fp4 for fp8's pre-MMA path)
INTERLEAVE = {("fp8_e4m3", "int4"): 0, ("bf16", "mxfp4"): 1, ("fp8_e4m3", "mxfp4"): 2}
INTERLEAVE_FUNCTIONS = (
    "interleave_int4_weights_for_sm90_mixed_gemm",
    "interleave_fp4_weights_for_sm90_mixed_gemm",
    "interleave_fp4_fp8_weights_for_sm90_mixed_gemm",
)
MIXED_LAUNCHER = "sm90_generic_mixed_moe_gemm_kernelLauncher"
SMALL_K_LAUNCHER = "sm90_generic_mixed_moe_small_k_kernelLauncher"
PRE_MMA_MODE = "kPreMmaE8M0"
PACKED_SCALES = "ElementScalePacked"
#: How the packed launcher sizes a pack (one K tile of one weight row), the rule the harness packs by
_PACK_RULE = re.compile(r"PackedScalesNum\s*=\s*get<2>\(CTAShape\{\}\)\s*/\s*group_size\s*;")
#: The mixed-input mainloop (relative to ``csrc/nv_internal``): how it reads B
MIXED_MAINLOOP_HPP = (
    "tensorrt_llm/cutlass_extensions/include/cutlass_extensions/gemm/collective/"
    "sm90_mma_array_tma_gmma_rs_warpspecialized_mixed_input_.hpp"
)
#: ... through LDSM, interleaved (``copy_tensors_A``), or as stored (``copy_tensors_MK``)
_READS_INTERLEAVED, _READS_STORED = (
    re.compile(r"\bcopy_tensors_A\s*\("),
    re.compile(r"\bcopy_tensors_MK\s*\("),
)
#: What the generator names FP4 without the launcher's alias (its ``DataType.e2m1``)
CUDA_FP4 = "__nv_fp4_e2m1"
_SAFE_FP4 = re.compile(r"\busing\s+SafeFP4\s*=")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _declares(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


@dataclass(frozen=True)
class ReleaseFeatures:
    """The pieces of one release's sources the tool uses where releases differ."""

    activation_fusion: bool  #: ``fused_activation_epilogue`` in the GEMM input
    precomputed_scheduler: bool  #: ``precomputed_scheduler_workspace_size`` in the GEMM input
    mixed_launcher: bool  #: the mixed-input launcher .inl defines its launcher
    mixed_small_k: bool  #: ... and the small-K launcher
    mixed_pre_mma: bool  #: ... and uses the pre-MMA ue8m0 scale mode
    mixed_fp4_alias: bool  #: ... and declares ``SafeFP4``
    mixed_packed_scales: bool  #: ... and reads its scales packed per CTA K (``ElementScalePacked``)
    mixed_pack_rule: bool  #: ... a pack holding ``get<2>(CTAShape{}) / group_size`` scales
    #: how the mixed mainloop reads B: "interleaved" (FlashInfer's interleave kernels' layout),
    #: "stored" (as the user holds it), None when it says neither
    mixed_weights: str | None
    uniform_fp4_alias: bool  #: the uniform launcher .inl declares ``SafeFP4``
    interleaves: tuple[bool, bool, bool]  #: which of :data:`INTERLEAVE_FUNCTIONS` exist

    def fp4_type(self, mixed: bool) -> str:
        """The FP4 type the unit names: the launcher's ``SafeFP4`` where it declares one (as
        the release's generator names it), else the CUDA type."""
        alias = self.mixed_fp4_alias if mixed else self.uniform_fp4_alias
        return "SafeFP4" if alias else CUDA_FP4


@cache
def release_features(data_dir: Path) -> ReleaseFeatures:
    """Read :class:`ReleaseFeatures` from ``data_dir`` (laid out like ``flashinfer/data``)."""
    nv = data_dir / "csrc" / "nv_internal"
    gemm_input = _read(nv / GEMM_INPUT_H)
    mixed = _read(nv / MIXED_LAUNCHER_INL)
    utils = _read(nv / MIXED_UTILS_CU)
    mainloop = _read(nv / MIXED_MAINLOOP_HPP)
    interleaved, stored = _READS_INTERLEAVED.search(mainloop), _READS_STORED.search(mainloop)
    interleaves = tuple(_declares(utils, name) for name in INTERLEAVE_FUNCTIONS)
    return ReleaseFeatures(
        activation_fusion=_declares(gemm_input, "fused_activation_epilogue"),
        precomputed_scheduler=_declares(gemm_input, "precomputed_scheduler_workspace_size"),
        mixed_launcher=_declares(mixed, MIXED_LAUNCHER),
        mixed_small_k=_declares(mixed, SMALL_K_LAUNCHER),
        mixed_pre_mma=_declares(mixed, PRE_MMA_MODE),
        mixed_fp4_alias=_SAFE_FP4.search(mixed) is not None,
        mixed_packed_scales=_declares(mixed, PACKED_SCALES),
        mixed_pack_rule=_PACK_RULE.search(mixed) is not None,
        mixed_weights="interleaved"
        if interleaved and not stored
        else "stored"
        if stored and not interleaved
        else None,
        uniform_fp4_alias=_SAFE_FP4.search(_read(nv / LAUNCHER_INL)) is not None,
        interleaves=(interleaves[0], interleaves[1], interleaves[2]),
    )


def harness_defines(features: ReleaseFeatures) -> str:
    """The ``#define`` lines that choose the harness's code paths for this release."""
    flags = {
        "TILECONFORM_HAS_ACTIVATION_FUSION": features.activation_fusion,
        "TILECONFORM_HAS_PRECOMPUTED_SCHEDULER": features.precomputed_scheduler,
        **{f"TILECONFORM_HAS_INTERLEAVE_{i}": have for i, have in enumerate(features.interleaves)},
        "TILECONFORM_MIXED_PACKED_SCALES": features.mixed_packed_scales,
        "TILECONFORM_MIXED_INTERLEAVED_WEIGHTS": features.mixed_weights == "interleaved",
    }
    return "\n".join(f"#define {name} {int(value)}" for name, value in flags.items())


def missing_piece(features: ReleaseFeatures, config: KernelConfig) -> str | None:
    """What ``config``'s unit needs that the release's sources lack (file and name), or a layout
    the harness does not know how to make for them, or None."""
    if config.fusion == "activation" and not features.activation_fusion:
        return f"{GEMM_INPUT_H} has no fused_activation_epilogue (EpilogueFusion::ACTIVATION)"
    if not config.mixed:
        return None
    if not features.mixed_launcher:
        return f"{MIXED_LAUNCHER_INL} defines no {MIXED_LAUNCHER}"
    if features.mixed_packed_scales and not features.mixed_pack_rule:
        return (
            f"{MIXED_LAUNCHER_INL} reads the group scales packed per CTA K ({PACKED_SCALES}), but "
            "not as PackedScalesNum = get<2>(CTAShape{}) / group_size, the packing the harness makes"
        )
    if features.mixed_weights is None:
        return (
            f"{MIXED_MAINLOOP_HPP} reads B neither through copy_tensors_A (interleaved) nor "
            "copy_tensors_MK (as stored): a weight layout the harness does not know"
        )
    interleave = INTERLEAVE[(config.act, config.weight)]
    if features.mixed_weights == "interleaved" and not features.interleaves[interleave]:
        kernel = INTERLEAVE_FUNCTIONS[interleave]
        return f"{MIXED_UTILS_CU} has no {kernel} (the weight layout the kernel reads)"
    if config.mainloop in SMALL_K_MAINLOOPS and not features.mixed_small_k:
        return f"{MIXED_LAUNCHER_INL} defines no {SMALL_K_LAUNCHER}"
    if pre_mma_scales(config) and not features.mixed_pre_mma:
        mode = f"MixedInputScaleMode::{PRE_MMA_MODE}"
        return f"{MIXED_LAUNCHER_INL} has no {mode} (fp8 x MXFP4's pre-MMA scales)"
    return None


def family(config: KernelConfig) -> str:
    """The configurations that share the harness's and the generated declarations' code paths:
    one probe answers for all of them (the tile and cluster change no declaration)."""
    kind = ""
    if config.mixed:
        kind = "mixed small-K" if config.mainloop in SMALL_K_MAINLOOPS else "mixed warp-specialized"
    parts = [arch_name(config.arch), f"{config.act} x {config.weight} -> {config.out}", config.fusion, kind]
    if config.swap_ab:
        parts.append("swap_ab")
    return " ".join(p for p in parts if p)
