"""Which MoE grouped-GEMM launcher instantiations exist: :class:`KernelConfig`, the configuration
space of each arch as FlashInfer's generator and TensorRT-LLM's launchers bound it, and
:func:`check_config`, which refuses (:class:`UnsupportedConfig`, with the reason) what a launcher
cannot express. Code generation (:mod:`.codegen`) and everything that names a kernel read this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ..archs import arch_name
from ..dtypes import (
    BLOCK_SCALED_PAIRS,
    DTYPES,
    MIXED_INPUT_PAIRS,
    UNSCALED_DTYPES,
    DType,
    dtype_label,
    shape_label,
    tile_k_elements,
)
from .axes import FUSIONS, MIXED_MAINLOOPS


class UnsupportedConfig(ValueError):
    """The launcher cannot express this configuration (the message says why)."""


@dataclass(frozen=True)
class KernelConfig:
    """One launcher instantiation. ``tile`` is CTA (M, N, K) with K in elements of ``act``."""

    arch: int
    act: str
    weight: str
    out: str
    tile: tuple[int, int, int]
    cluster: tuple[int, int, int]
    swap_ab: bool
    fusion: str  # one of FUSIONS
    #: SM10x epilogue schedule, "tma" or "nosmem" ("" elsewhere: the launcher fixes it); ""
    #: on SM10x is read as "tma", the schedule the launcher takes by default
    epilogue: str = ""
    #: DYNAMIC_CGA: the cluster is a runtime value (the case's dynamic cluster); ``cluster``
    #: then only says 1SM (M 1) or 2SM (M 2)
    dynamic_cga: bool = False
    #: SM90 mixed input: the mainloop schedule (:data:`MIXED_MAINLOOPS`); "" elsewhere, where the
    #: launcher fixes it
    mainloop: str = ""
    #: Another arch's kernel set that the arch's FlashInfer module compiles too, for this arch
    #: (:data:`KERNEL_ARCHES`: SM103's module builds SM100's kernels); 0: the arch's own kernels
    kernel_arch: int = 0

    def __post_init__(self) -> None:
        if self.arch in SM10X and self.epilogue == "":
            object.__setattr__(self, "epilogue", "tma")

    @property
    def tag(self) -> int:
        """The CUTLASS arch tag the kernel is instantiated with (``cutlass::arch::SmNN``): its
        kernel set's arch. SM121 builds FlashInfer's SM120 set (``generate_sm120_operations(
        has_arch(120) or has_arch(121))``; CUTLASS has no Sm121 tag), compiled for sm_121a."""
        return self.kernel_arch or (120 if self.arch == 121 else self.arch)

    @property
    def name(self) -> str:
        """Identifier usable as a file name, e.g. ``sm90_bf16_bf16_bf16_128x128x64_1x1x1_none``
        (``_nosmem`` and ``_dyncga`` added for those SM10x variants, the mainloop for SM90's
        mixed-input kernels)."""
        tile, cluster = shape_label(self.tile), shape_label(self.cluster)
        swap = "_swap_ab" if self.swap_ab else ""
        variant = ("_nosmem" if self.epilogue == "nosmem" else "") + ("_dyncga" if self.dynamic_cga else "")
        variant += f"_{self.mainloop}" if self.mainloop else ""
        variant += f"_{arch_name(self.kernel_arch)}kernel" if self.kernel_arch else ""
        dtypes = f"{self.act}_{self.weight}_{self.out}"
        return f"{arch_name(self.arch)}_{dtypes}_{tile}_{cluster}_{self.fusion}{variant}{swap}"

    @property
    def dtype_label(self) -> str:
        """The dtypes as case ids spell them (``nvfp4-bf16``)."""
        return dtype_label(self.act, self.weight, self.out)

    @property
    def mixed(self) -> bool:
        """An SM90 mixed-input kernel: built with ``moe_gemm_tma_ws_mixed_input_launcher``."""
        return self.arch == 90 and (self.act, self.weight) in MIXED_INPUT_PAIRS

    def as_dict(self) -> dict[str, Any]:
        """The fields, ``kernel_arch`` only where set: the text a harness embeds (and so the
        build cache's key) stays what it was for every kernel of its arch's own set."""
        found = {**asdict(self), "tile": list(self.tile), "cluster": list(self.cluster)}
        if not self.kernel_arch:
            del found["kernel_arch"]
        return found


def _dtype(name: str, role: str) -> DType:
    if name not in DTYPES:
        raise UnsupportedConfig(f"unknown {role} dtype {name!r}; known: {', '.join(DTYPES)}")
    return DTYPES[name]


def tile_k_bytes(config: KernelConfig) -> int:
    """CTA K in bytes of the activation type: the K of TensorRT-LLM's tile enum names
    (``CutlassTileConfigSM90::CtaShape128x128x128B`` is 128x128x64 elements for bf16); the
    inverse of :func:`~pytest_tileconform.dtypes.tile_k_elements`."""
    bits = config.tile[2] * _dtype(config.act, "activation").bits
    if bits % 8:
        raise UnsupportedConfig(f"CTA K={config.tile[2]} of {config.act} is not a whole number of bytes")
    return bits // 8


def _check_shapes(config: KernelConfig) -> None:
    for label, shape in (("tile", config.tile), ("cluster", config.cluster)):
        if len(shape) != 3 or any(not isinstance(v, int) or v <= 0 for v in shape):
            raise UnsupportedConfig(f"{label} {shape!r} must be three positive integers")
    if config.cluster[2] != 1:
        raise UnsupportedConfig(
            f"cluster {config.cluster}: the MoE launcher only has clusters of depth 1 (M x N x 1)"
        )
    if config.fusion not in FUSIONS:
        raise UnsupportedConfig(
            f"fusion {config.fusion!r} is not one of {', '.join(repr(f) for f in FUSIONS)}"
        )


#: SM90 mixed-input mainloops of the single-warpgroup small-K kernels
SMALL_K_MAINLOOPS = MIXED_MAINLOOPS[2:]
#: The CTA shapes (K in elements) of generate_sm90_mixed_type_grouped_gemm_operations'
#: warp-specialized kernels, and of its small-K ones (fp8 x MXFP4 only)
MIXED_TILES: tuple[tuple[int, int, int], ...] = (
    *((m, n, k) for m in (64, 128) for n in (16, 32, 64, 128) for k in (128, 256, 512)),
    (128, 256, 128),
    (128, 256, 256),
    (256, 128, 128),
    (256, 128, 256),
    (256, 256, 128),
)
SMALL_K_TILES: tuple[tuple[int, int, int], ...] = tuple((128, n, 128) for n in (8, 16, 32, 40, 64))
#: What each mixed pair writes (the generator's output types for it)
MIXED_OUTS = {
    ("fp8_e4m3", "int4"): ("fp16", "bf16"),
    ("bf16", "mxfp4"): ("bf16",),
    ("fp8_e4m3", "mxfp4"): ("fp16", "bf16"),
}


def pre_mma_scales(config: KernelConfig) -> bool:
    """fp8 x MXFP4: the kernel folds the ue8m0 scales into the weights before the MMA
    (``MixedInputScaleMode::kPreMmaE8M0``; the others scale after it)."""
    return config.mixed and config.weight == "mxfp4" and config.act == "fp8_e4m3"


def _check_sm90_mixed(config: KernelConfig) -> None:
    # generate_sm90_mixed_type_grouped_gemm_operations and the launcher's static_asserts
    pair = (config.act, config.weight)
    if config.out not in MIXED_OUTS[pair]:
        raise UnsupportedConfig(
            f"SM90 {config.act} x {config.weight} MoE GEMM writes "
            f"{' or '.join(MIXED_OUTS[pair])}, not {config.out}"
        )
    if not config.swap_ab:
        raise UnsupportedConfig(
            "SM90 mixed-input MoE GEMMs compute the swapped product only (swap_ab: true; the "
            "launcher refuses anything else)"
        )
    if config.fusion != "none":
        raise UnsupportedConfig(f"SM90's mixed-input launcher has no {config.fusion} epilogue")
    if config.mainloop not in MIXED_MAINLOOPS:
        raise UnsupportedConfig(
            f"SM90 mixed-input kernels need a mainloop, one of {', '.join(MIXED_MAINLOOPS)}; "
            f"got {config.mainloop or 'none'}"
        )
    if config.mainloop in SMALL_K_MAINLOOPS:
        if not pre_mma_scales(config):
            raise UnsupportedConfig("the single-warpgroup small-K kernels are fp8 x mxfp4 only")
        if config.tile not in SMALL_K_TILES or config.cluster != (1, 1, 1):
            raise UnsupportedConfig(
                f"tile {config.tile} cluster {config.cluster}: the small-K kernels are 128 x "
                "{8, 16, 32, 40, 64} x 128 with cluster 1x1x1"
            )
        return
    if config.tile not in MIXED_TILES:
        raise UnsupportedConfig(
            f"tile {config.tile}: not a CTA shape of FlashInfer's SM90 mixed-input kernels"
        )
    if config.cluster[0] not in (1, 2) or config.cluster[1] not in (1, 2):
        raise UnsupportedConfig(f"cluster {config.cluster}: SM90 mixed-input clusters are 1 or 2 by 1 or 2")
    if config.mainloop == "cooperative" and config.tile[0] < 128:
        raise UnsupportedConfig("the cooperative mainloop needs CTA M >= 128 (two consumer warpgroups)")


def _check_sm90(config: KernelConfig) -> None:
    if config.mixed:
        _check_sm90_mixed(config)
        return
    if config.mainloop:
        raise UnsupportedConfig(
            "a mainloop is chosen for SM90's mixed-input kernels only; this launcher fixes it"
        )
    # TensorRT-LLM's MoE runner on Hopper instantiates this launcher only for uniform
    # act == weight dtypes (mixed inputs go to the separate mixed-input launcher, FP4/MX block
    # scaling is Blackwell only: static_asserts in the .inl) and writes D in the activation
    # type, or bf16/fp16 for fp8 (generate_sm90_grouped_gemm_operations).
    uniform = UNSCALED_DTYPES
    if config.act not in uniform or config.weight != config.act:
        mixed = ", ".join(f"{a} x {w}" for a, w in MIXED_INPUT_PAIRS)
        raise UnsupportedConfig(
            f"SM90 MoE GEMM needs equal activation and weight dtypes from {', '.join(uniform)}, "
            f"or one of the mixed-input pairs {mixed}; got act={config.act}, weight={config.weight}"
        )
    outs = ("bf16", "fp16") if config.act == "fp8_e4m3" else (config.act,)
    if config.out not in outs:
        raise UnsupportedConfig(f"SM90 {config.act} MoE GEMM writes {' or '.join(outs)}, not {config.out}")


#: SM120/SM121 input pairs (act, weight) of ``generate_sm120_grouped_gemm_operations``:
#: NVFP4 x NVFP4 (e2m1, e4m3 scale per 16) and FP8 e4m3 x FP4 with ``is_mx_fpx=True``, which
#: the launcher builds as ``mx_float8_t`` x ``mx_float4_t`` (ue8m0 scales per 32 on both).
SM120_INPUTS: tuple[tuple[str, str], ...] = (("nvfp4", "nvfp4"), ("mxfp8", "mxfp4"))
#: CTA shapes (K in elements of the activation) FlashInfer emits for SM120; the mixed
#: MXFP8 x MXFP4 pair only gets the 128xNx128 ones ("Minimal filter" in the generator).
SM120_TILES: tuple[tuple[int, int, int], ...] = (
    (128, 32, 128),
    (128, 32, 256),
    (128, 64, 128),
    (128, 64, 256),
    (128, 128, 128),
    (128, 128, 256),
    (256, 128, 128),
    (128, 256, 128),
)
SM120_MIXED_TILES: tuple[tuple[int, int, int], ...] = ((128, 32, 128), (128, 64, 128), (128, 128, 128))


def _check_sm120(config: KernelConfig) -> None:
    # isValidSM120MOESpecialisation (moe_tma_warp_specialized_traits.h) admits FP4 x FP4 and
    # FP8 x FP4 only; generate_sm120_grouped_gemm_operations writes D as fp16 or bf16, and the
    # dispatch (are_tile_shapes_supported_sm120) has no cluster other than 1x1x1.
    if (config.act, config.weight) not in SM120_INPUTS:
        pairs = ", ".join(f"{a} x {w}" for a, w in SM120_INPUTS)
        raise UnsupportedConfig(
            f"SM{config.arch} MoE GEMM takes {pairs} (act x weight); got {config.act} x {config.weight}"
        )
    if config.out not in ("bf16", "fp16"):
        raise UnsupportedConfig(
            f"SM{config.arch} block-scaled MoE GEMM writes bf16 or fp16, not {config.out}"
        )
    if config.cluster != (1, 1, 1):
        raise UnsupportedConfig(
            f"cluster {config.cluster}: SM{config.arch} MoE GEMMs are 1x1x1 only "
            "(are_tile_shapes_supported_sm120)"
        )


#: The SM10x archs of the launcher (B200 / GB200, B300 / GB300).
SM10X = (100, 103)
#: The archs the launcher has a path for (:func:`check_config`'s branches), as a matrix names them.
LAUNCHER_ARCHS: tuple[str, ...] = ("sm90", *(arch_name(a) for a in SM10X), "sm120", "sm121")
#: SM100 inputs (act, weight) of ``generate_sm100_grouped_gemm_operations``: the uniform
#: unscaled types and the block-scaled pairs (NVFP4, MXFP8 x MXFP4, MXFP8 x MXFP8).
SM100_INPUTS: tuple[tuple[str, str], ...] = (
    *((t, t) for t in UNSCALED_DTYPES),
    *BLOCK_SCALED_PAIRS,
)
#: SM103's own kernels (``generate_sm103_operations``: arch tag Sm103, the Ultra block-scaled
#: mainloop): NVFP4 only, CTA 128 x 128 or 128 x 256.
SM103_INPUTS: tuple[tuple[str, str], ...] = (("nvfp4", "nvfp4"),)
#: The other archs' kernel sets an arch's fused-MoE module compiles for that arch:
#: ``generate_gemm_operations`` adds ``generate_sm100_operations`` when ``has_arch(103)``.
KERNEL_ARCHES: dict[int, tuple[int, ...]] = {103: (100,)}
#: SM10x epilogue schedules as generate_kernels.py writes them into the instantiation
#: (``PtrArray...1Sm`` with "1Sm" stripped; the launcher picks the 2Sm one from a cluster of M 2).
SM10X_EPILOGUE_SCHEDULES = {"tma": "PtrArrayTmaWarpSpecialized", "nosmem": "PtrArrayNoSmemWarpSpecialized"}


def sm100_tile_k(act: str, tile_n: int) -> int:
    """``calc_shape_mnk_sm100_grouped_gemm``: 128 bytes of the activation, 256 for fp8 with N 8."""
    return tile_k_elements(256 if DTYPES[act].library == "e4m3" and tile_n == 8 else 128, act)


def dynamic_fallback(dynamic: tuple[int, int, int]) -> tuple[int, int, int]:
    """The fallback cluster FlashInfer's heuristic pairs a dynamic cluster with
    (``get_candidate_configs_sm100``: 1x1x1 for 1x1x1, else 2x1x1)."""
    return (1, 1, 1) if tuple(dynamic) == (1, 1, 1) else (2, 1, 1)


#: The runtime clusters FlashInfer's SM100 heuristic offers dynamic-CGA kernels
#: (``get_candidate_configs_sm100``; 4x4x1 is commented out there).
HEURISTIC_DYNAMIC_CLUSTERS: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (4, 1, 1), (4, 2, 1))


def dynamic_clusters(cluster: tuple[int, int, int]) -> tuple[tuple[int, int, int], ...]:
    """The runtime clusters the heuristic pairs a dynamic-CGA kernel of 1SM (``cluster`` M 1)
    or 2SM (M 2) with: a 2SM kernel only gets clusters of even M (``supports_2sm``)."""
    return tuple(d for d in HEURISTIC_DYNAMIC_CLUSTERS if d[0] % cluster[0] == 0)


#: FlashInfer's SM100 activation-fusion kernels (``generate_sm100_grouped_gemm_operations``,
#: "Keep activation fusion separate"): a ClampedRelu2 epilogue that writes D in the activation
#: type, CTA M x N of ACTIVATION_TILES_MN (K as calc_shape_mnk_sm100_grouped_gemm), 1SM or 2SM,
#: static and dynamic clusters, the TMA epilogue, no swap_ab; (act, weight, out) of
#: ACTIVATION_TYPES, ``out`` being the generator's output type (the launcher's OutputType,
#: which D does not take: :func:`d_dtype`).
ACTIVATION_TILES_MN: tuple[tuple[int, int], ...] = ((128, 64), (128, 128), (128, 256))
ACTIVATION_CLUSTERS: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (2, 1, 1))
ACTIVATION_TYPES: tuple[tuple[str, str, str], ...] = (
    ("mxfp8", "mxfp8", "fp16"),
    ("mxfp8", "mxfp8", "bf16"),
    ("bf16", "bf16", "bf16"),
)


def d_dtype(act: str, out: str, fusion: str) -> str:
    """The dtype of D: the activation type with the activation fusion (the launcher's
    ``ElementD = ElementAct``; MXFP8 D comes with ue8m0 scales per 32), else ``out``."""
    return act if fusion == "activation" else out


def _check_activation(config: KernelConfig) -> None:
    # the generator's activation loop; the launcher static_asserts SM10x and no swap_ab
    where = f"FlashInfer's activation-fusion kernels are SM100's (arch tag Sm100) only, got Sm{config.tag}"
    checks = (
        (config.tag == 100, where),
        (not config.swap_ab, "the activation fusion needs swap_ab false (the launcher's static_assert)"),
        (config.epilogue == "tma", "the activation fusion has the TMA epilogue only"),
        (
            (config.act, config.weight, config.out) in ACTIVATION_TYPES,
            f"activation fusion takes {', '.join('x'.join(t[:2]) + '->' + t[2] for t in ACTIVATION_TYPES)} "
            f"(act x weight -> out), got {config.act}x{config.weight}->{config.out}",
        ),
        (
            config.tile[:2] in ACTIVATION_TILES_MN and config.cluster in ACTIVATION_CLUSTERS,
            f"tile {config.tile} cluster {config.cluster}: FlashInfer's activation-fusion kernels are "
            f"CTA {', '.join(f'{m}x{n}' for m, n in ACTIVATION_TILES_MN)} with cluster 1x1x1 or 2x1x1",
        ),
    )
    for ok, reason in checks:
        if not ok:
            raise UnsupportedConfig(reason)


def _check_outs(config: KernelConfig) -> None:
    act = DTYPES[config.act]
    outs = ("fp16", "bf16") if act.bits <= 8 else (config.act,)
    if config.out not in outs:
        raise UnsupportedConfig(
            f"SM{config.arch} {config.act} MoE GEMM writes {' or '.join(outs)}, not {config.out}"
        )


def _check_sm10x(config: KernelConfig) -> None:
    # generate_sm100_grouped_gemm_operations + is_gemm_op_valid_sm100 (generate_kernels.py)
    inputs = SM103_INPUTS if config.tag == 103 else SM100_INPUTS
    if (config.act, config.weight) not in inputs:
        pairs = ", ".join(a if a == w else f"{a} x {w}" for a, w in inputs)
        raise UnsupportedConfig(
            f"SM{config.tag} MoE GEMM takes {pairs} (act x weight); got {config.act} x {config.weight}"
        )
    _check_outs(config)
    if config.epilogue not in SM10X_EPILOGUE_SCHEDULES:
        raise UnsupportedConfig(
            f"epilogue {config.epilogue!r}: SM{config.arch} has {', '.join(SM10X_EPILOGUE_SCHEDULES)}"
        )
    m, n, k = config.tile
    nosmem = config.epilogue == "nosmem"
    if config.fusion == "finalize" and nosmem:
        raise UnsupportedConfig("the finalize fusion has the TMA epilogue only (is_gemm_op_valid_sm100)")
    if config.cluster not in ((1, 1, 1), (2, 1, 1)):
        raise UnsupportedConfig(
            f"cluster {config.cluster}: FlashInfer's SM10x MoE GEMMs are 1x1x1 (1SM) or 2x1x1 (2SM); "
            "larger clusters are dynamic (dynamic_cluster)"
        )
    if k != sm100_tile_k(config.act, n):
        raise UnsupportedConfig(
            f"tile {config.tile}: SM10x CTA K is {sm100_tile_k(config.act, n)} {config.act} elements "
            "(calc_shape_mnk_sm100_grouped_gemm)"
        )
    if config.tag == 103:
        if m != 128 or n not in (128, 256):
            raise UnsupportedConfig(f"tile {config.tile}: SM103's kernels are CTA 128x128 or 128x256")
        return
    if m not in (64, 128) or n not in (8, 16, 32, 64, 128, 192, 256):
        raise UnsupportedConfig(f"tile {config.tile}: FlashInfer emits SM100 CTA M 64/128, N 8..256")
    act, weight = DTYPES[config.act], DTYPES[config.weight]
    if act.block_scaled or weight.block_scaled:
        if n not in (64, 128, 256) or m != 128:
            raise UnsupportedConfig(f"tile {config.tile}: block-scaled SM100 tiles are 128 x 64/128/256")
        if nosmem:
            raise UnsupportedConfig("block-scaled SM100 kernels have the TMA epilogue only")
    small_fp8 = config.act == "fp8_e4m3" and n in (8, 16) and config.cluster == (1, 1, 1)
    if small_fp8:
        ok = m != 128 or n % 16 == 0
    else:
        ok = n % 32 == 0 and not (config.cluster[0] == 2 and n % 64 != 0)
    if not ok:
        raise UnsupportedConfig(f"tile {config.tile} cluster {config.cluster} fails is_gemm_op_valid_sm100")


def instantiated_dtypes(arch: int) -> tuple[tuple[str, str, str], ...]:
    """Every (act, weight, out) the launcher has kernels of on ``arch`` (its own and those its
    module builds of another arch, :data:`KERNEL_ARCHES`), as the checks below admit them: what
    a matrix may ask of that arch before any tile is looked at."""
    if arch == 90:
        uniform = [
            (t, t, out) for t in UNSCALED_DTYPES for out in (("bf16", "fp16") if t == "fp8_e4m3" else (t,))
        ]
        mixed = [(a, w, out) for (a, w), outs in MIXED_OUTS.items() for out in outs]
        return (*uniform, *mixed)
    if arch in (120, 121):
        return tuple((a, w, out) for a, w in SM120_INPUTS for out in ("bf16", "fp16"))
    if arch in SM10X:
        return tuple(
            (a, w, out)
            for a, w in SM100_INPUTS
            for out in (("fp16", "bf16") if DTYPES[a].bits <= 8 else (a,))
        )
    return ()


def check_config(config: KernelConfig) -> None:
    """Raise :class:`UnsupportedConfig` unless the launcher can express ``config``."""
    for name, role in ((config.act, "activation"), (config.weight, "weight"), (config.out, "output")):
        _dtype(name, role)
    _check_shapes(config)
    tile_k_bytes(config)
    if config.kernel_arch and config.kernel_arch not in KERNEL_ARCHES.get(config.arch, ()):
        others = ", ".join(
            f"{arch_name(k)} for {arch_name(a)}" for a, ks in KERNEL_ARCHES.items() for k in ks
        )
        raise UnsupportedConfig(
            f"SM{config.arch}: FlashInfer builds no {arch_name(config.kernel_arch)} kernels for it "
            f"(another arch's kernels are built only as {others})"
        )
    if config.mainloop and config.arch != 90:
        raise UnsupportedConfig(f"SM{config.arch}: a mainloop is chosen for SM90's mixed-input kernels only")
    if config.arch not in SM10X and (config.epilogue or config.dynamic_cga):
        raise UnsupportedConfig(
            f"SM{config.arch}: the launcher fixes the epilogue schedule and the cluster "
            "(epilogue and dynamic_cluster are SM10x variants)"
        )
    if config.fusion == "activation":
        _check_activation(config)
    if config.arch == 90:
        _check_sm90(config)
    elif config.arch in (120, 121):
        _check_sm120(config)
    elif config.arch in SM10X:
        _check_sm10x(config)
    else:
        raise UnsupportedConfig(f"the TMA warp-specialized MoE launcher has no SM{config.arch} path")


#: FlashInfer's fc1 -> fc2 pairing of one tile (CutlassMoeFCRunner::runMoe): GEMM 1 without a
#: fusion, GEMM 2 with finalize
SEQUENCE_FUSIONS = ("none", "finalize")


def sequence_partner(config: KernelConfig) -> KernelConfig | None:
    """The other GEMM of ``config``'s fc1 -> fc2 pair: the same SM90 instantiation with the other
    of :data:`SEQUENCE_FUSIONS` (FlashInfer generates both for every SM90 tile it ships,
    generate_sm90_grouped_gemm_operations); None where this launcher pairs nothing so (another
    arch, SM90's mixed-input launcher, which has no finalize, or another fusion)."""
    if config.tag != 90 or config.mixed or config.fusion not in SEQUENCE_FUSIONS:
        return None
    return replace(config, fusion=SEQUENCE_FUSIONS[1 - SEQUENCE_FUSIONS.index(config.fusion)])
