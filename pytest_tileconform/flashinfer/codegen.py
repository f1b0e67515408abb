"""The translation unit that instantiates FlashInfer MoE grouped-GEMM configurations
(:class:`~.configs.KernelConfig`, checked by :func:`~.configs.check_config`).

The generated ``.cu`` file is laid out like the ``*.generated.cu`` files of FlashInfer's
``generate_kernels.py`` (flashinfer/jit/gemm/cutlass/generate_kernels.py): it includes the
TensorRT-LLM launcher ``moe_gemm_tma_ws_launcher.inl`` (SM90's mixed-input kernels:
``moe_gemm_tma_ws_mixed_input_launcher.inl``) and expands
``INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM`` with the arguments that generator writes for the
configuration, or for several (FlashInfer puts 8 in a file; sharing the front end makes each
much cheaper to build). It then includes ``harness/harness.cu`` and defines the table of the
file's cases, which the harness runs one at a time.

How the harness is run, the files it reads and writes and the verdict it gives are described in
``harness/PROTOCOL.md``. The nvcc command that builds a unit is
:func:`~pytest_tileconform.flashinfer.nvcc_flags.nvcc_command`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Literal

from ..dtypes import DTYPES
from .configs import (
    SM10X,
    SM10X_EPILOGUE_SCHEDULES,
    SMALL_K_MAINLOOPS,
    KernelConfig,
    check_config,
    d_dtype,
    pre_mma_scales,
    sequence_partner,
)
from .features import INTERLEAVE, ReleaseFeatures, harness_defines
from .sources import LAUNCHER_INL, MIXED_LAUNCHER_INL, MIXED_UTILS_CU

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
#: Defined for the unit's second translation unit, its harness (:func:`generate_translation_unit`).
HARNESS_PART = "TILECONFORM_HARNESS_PART"
#: How a unit's file holds its harness: ``together`` in one translation unit with its kernels,
#: ``apart`` as a second one (:data:`HARNESS_PART`), or ``probe``: the harness alone, the
#: kernels named but not instantiated (:func:`probe_unit`).
Layout = Literal["together", "apart", "probe"]


def harness_apart(instantiations: int) -> bool:
    """Whether a unit of ``instantiations`` compiles its harness apart, as a second translation
    unit beside its kernels' (:func:`generate_translation_unit`). Only a unit of one: its
    harness then leaves the critical path of its compile (a cold first verdict about 12 s sooner
    on the H200 host), for about 56 CPU-s more, since the harness's unit parses the launcher's
    headers once more (measured on the CPU machine: kernels 91.5 CPU-s, harness 67.2, both in
    one 102.1). A shared unit pays that parse once for all its kernels, and a matrix's cold build
    is bound by CPU, not by one unit's path."""
    return instantiations == 1


def _macro_fusion(config: KernelConfig) -> str:
    return config.fusion.upper()  # EpilogueFusion::NONE / FINALIZE / ACTIVATION


# SM90 and SM120 hard-code their epilogue schedule in the launcher; generate_kernels.py passes
# epi_schedule=None for them, which it spells "void".
_EPILOGUE_SCHEDULE_SM90 = "void"


def _epilogue_schedule(config: KernelConfig) -> str:
    return SM10X_EPILOGUE_SCHEDULES[config.epilogue] if config.arch in SM10X else _EPILOGUE_SCHEDULE_SM90


def _cute_shape(shape: tuple[int, int, int]) -> str:
    return "cute::Shape<" + ", ".join(f"cute::Int<{v}>" for v in shape) + ">"


_MIXED_SCHEDULES = {
    "pingpong": "cutlass::gemm::KernelTmaWarpSpecializedPingpong",
    "cooperative": "cutlass::gemm::KernelTmaWarpSpecializedCooperative",
}
_PRE_MMA = "cutlass::gemm::collective::MixedInputScaleMode::kPreMmaE8M0"


def _mixed_launcher(config: KernelConfig) -> tuple[str, str]:
    """The mixed-input launcher's name and its template arguments after the three types, as
    generate_kernels.py writes them: the small-K kernels are Pingpong with their single-warpgroup
    schedule appended."""
    small_k = config.mainloop in SMALL_K_MAINLOOPS
    schedule = _MIXED_SCHEDULES["pingpong" if small_k else config.mainloop]
    optional = [_PRE_MMA] if pre_mma_scales(config) else []
    if small_k:
        optional.append(f"tensorrt_llm::cutlass_extensions::MainloopScheduleType::{config.mainloop.upper()}")
    args = (
        f"tensorrt_llm::cutlass_extensions::EpilogueOpDefault, {_cute_shape(config.tile)}, "
        f"{_cute_shape(config.cluster)}, {schedule}, cutlass::epilogue::TmaWarpSpecializedCooperative, "
        "cutlass::WeightOnlyQuantOp::FINEGRAINED_SCALE_ONLY" + "".join(f", {a}" for a in optional)
    )
    name = (
        "sm90_generic_mixed_moe_small_k_kernelLauncher"
        if small_k
        else "sm90_generic_mixed_moe_gemm_kernelLauncher"
    )
    return name, args


def _cuda_type(dtype: str, features: ReleaseFeatures | None, mixed: bool) -> str:
    """The C++ type of ``dtype`` as the release's generator names it: FP4 is the launcher's
    ``SafeFP4`` only where that launcher declares one (``features``; None: as :data:`DTYPES`
    names it, the current generator's spelling, for comparisons with a generator)."""
    cuda_type = DTYPES[dtype].cuda_type
    if cuda_type == "SafeFP4" and features is not None:
        return features.fp4_type(mixed)
    return cuda_type


def _mixed_instantiation(config: KernelConfig, features: ReleaseFeatures | None) -> str:
    act, weight, out = (_cuda_type(d, features, True) for d in (config.act, config.weight, config.out))
    name, args = _mixed_launcher(config)
    types = f"{act}, {weight}, {out}"
    return (
        f"\ntemplate void {name}<{types},\n{args}> (\n"
        f"GroupedGemmInput<{types}, {out}>inputs, "
        "TmaWarpSpecializedGroupedGemmInput hopper_inputs, int sm_count_, size_t* workspace_size);\n"
    )


def instantiation(config: KernelConfig, features: ReleaseFeatures | None = None) -> str:
    """The ``INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM`` block, formatted exactly as
    ``instantiate_operation_tma_warp_specialized`` in generate_kernels.py formats it (for SM90's
    mixed-input kernels the explicit instantiation of their launcher that it writes instead),
    with the types the release of ``features`` names."""
    check_config(config)
    if config.mixed:
        return _mixed_instantiation(config, features)
    act, weight = DTYPES[config.act], DTYPES[config.weight]
    act_type, weight_type, out_type = (
        _cuda_type(d, features, False) for d in (config.act, config.weight, config.out)
    )
    m, n, k = config.tile
    cm, cn, ck = config.cluster
    return f"""
#if {act.guard} && {weight.guard}
        INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm{config.tag}, {act_type}, {weight_type}, {out_type},
        {_epilogue_schedule(config)}, EpilogueOpDefault, {_macro_fusion(config)},
        {m}, {n}, {k}, {cm}, {cn}, {ck},
        {str(act.mx or weight.mx).lower()}, {str(config.dynamic_cga).lower()}, false, {str(config.swap_ab).lower()});
#endif"""  # noqa: E501  (kept byte-identical to FlashInfer's template)


def _qualified(dtype: str, features: ReleaseFeatures | None, mixed: bool) -> str:
    """``SafeFP4`` is an alias the launcher .inl declares in ``cutlass_kernels_oss``; the
    harness names it from outside that namespace."""
    cuda_type = _cuda_type(dtype, features, mixed)
    return f"tensorrt_llm::kernels::cutlass_kernels_oss::{cuda_type}" if cuda_type == "SafeFP4" else cuda_type


def _launcher_epilogue_schedule(config: KernelConfig) -> str:
    schedule = _epilogue_schedule(config)
    return f"cutlass::epilogue::{schedule}" if config.arch in SM10X else schedule


def launcher_template_args(config: KernelConfig, features: ReleaseFeatures | None = None) -> str:
    """Template arguments of the instantiated ``tma_warp_specialized_generic_moe_gemm_kernelLauncher``."""
    check_config(config)
    act, weight = DTYPES[config.act], DTYPES[config.weight]
    fusion = (
        "tensorrt_llm::kernels::cutlass_kernels::TmaWarpSpecializedGroupedGemmInput::"
        f"EpilogueFusion::{_macro_fusion(config)}"
    )
    tile = ", ".join(f"cute::Int<{v}>" for v in config.tile)
    cluster = ", ".join(f"cute::Int<{v}>" for v in config.cluster)
    return ", ".join(
        [
            f"cutlass::arch::Sm{config.tag}",
            _qualified(config.act, features, False),
            _qualified(config.weight, features, False),
            _qualified(config.out, features, False),
            _launcher_epilogue_schedule(config),
            "tensorrt_llm::cutlass_extensions::EpilogueOpDefault",
            fusion,
            f"cute::Shape<{tile}>",
            f"cute::Shape<{cluster}>",
            str(act.mx or weight.mx).lower(),
            str(config.dynamic_cga).lower(),  # DYNAMIC_CGA
            "false",  # BIAS
            str(config.swap_ab).lower(),
        ]
    )


@cache
def harness_fingerprint() -> str:
    """SHA-256 of the harness sources; part of every generated TU, so cached builds of an older
    harness are never reused."""
    digest = hashlib.sha256()
    for path in sorted(HARNESS_DIR.iterdir()):
        if path.suffix in (".cu", ".h"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _block_scale_kind(config: KernelConfig) -> int:
    """The harness's ``block_scale``: 0 none, 1 NVFP4 (e4m3 per 16), 2 MXFPX (ue8m0 per 32);
    the launcher's IsBlockScaled (FP4 act, FP8 x FP4 or is_mx_fpx)."""
    act, weight = DTYPES[config.act], DTYPES[config.weight]
    if act.mx or weight.mx:
        return 2
    return 1 if config.act == "nvfp4" else 0


def _launcher_function(config: KernelConfig, features: ReleaseFeatures) -> str:
    """The instantiated launcher of ``config``, by its qualified name and template arguments."""
    if config.mixed:
        name, args = _mixed_launcher(config)
        types = ", ".join(_qualified(d, features, True) for d in (config.act, config.weight, config.out))
        return f"tensorrt_llm::kernels::cutlass_kernels_oss::{name}<{types}, {args}>"
    return (
        "tensorrt_llm::kernels::cutlass_kernels_oss::tma_warp_specialized_generic_moe_gemm_kernelLauncher<\n"
        f"          {launcher_template_args(config, features)}>"
    )


def _launcher_pointer(config: KernelConfig, index: int, features: ReleaseFeatures, layout: Layout) -> str:
    """The case's ``launcher``: the instantiated function; apart, through the pointer the
    kernels' translation unit defines (:func:`_launcher_variables`); in a probe a null pointer
    of its type. Those two name the declaration without instantiating the kernel."""
    if layout == "probe":
        return f"static constexpr decltype(&{_launcher_function(config, features)}) launcher = nullptr;"
    if layout == "apart":
        return f"static constexpr auto& launcher = ::tileconform::launchers::case{index};"
    return f"static constexpr auto* launcher =\n      &{_launcher_function(config, features)};"


def _launcher_variables(configs: Sequence[KernelConfig], features: ReleaseFeatures, define: bool) -> str:
    """The pointers to the unit's instantiated launchers through which the harness calls them:
    declared in both translation units, defined (``define``) in the kernels' one. Hidden: each
    unit's library keeps its own."""
    lines = []
    for i, config in enumerate(configs):
        function = _launcher_function(config, features)
        lines += [
            f"using Launcher{i} = decltype(&{function});",
            f"{_HIDDEN} extern Launcher{i} const case{i};",
        ]
        if define:
            lines.append(f"{_HIDDEN} Launcher{i} const case{i} = &{function};")
    body = "\n".join(lines)
    return f"namespace tileconform::launchers {{  // the launchers the harness calls\n{body}\n}}"


_HIDDEN = '__attribute__((visibility("hidden")))'


def _mixed_case_struct(config: KernelConfig, index: int, features: ReleaseFeatures, layout: Layout) -> str:
    act, weight, out = (DTYPES[config.act], DTYPES[config.weight], DTYPES[config.out])
    group = weight.block_size
    scale_bytes = 2 if weight.scale_format == "bf16" else 1
    small_k = str(config.mainloop in SMALL_K_MAINLOOPS).lower()
    interleave = INTERLEAVE[(config.act, config.weight)]
    return f"""struct Case{index} {{  // {config.name}
  using Act = {_qualified(config.act, features, True)};
  using Weight = {_qualified(config.weight, features, True)};
  using Out = {_qualified(config.out, features, True)};
  {_launcher_pointer(config, index, features, layout)}
  static constexpr int arch = {config.arch};
  static constexpr int act_bits = {act.bits}, weight_bits = {weight.bits}, out_bits = {out.bits};
  static constexpr int block_scale = 0;
  static constexpr bool swap_ab = true, finalize = false, activation = false, dynamic_cga = false;
  static constexpr bool d_scaled = false;
  static constexpr bool mixed = true;
  static constexpr int group = {group}, scale_bytes = {scale_bytes}, interleave = {interleave};
  static constexpr int tile_k = {config.tile[2]};
  static constexpr bool pre_mma = {str(pre_mma_scales(config)).lower()}, small_k = {small_k};
}};"""


def _case_struct(config: KernelConfig, index: int, features: ReleaseFeatures, layout: Layout) -> str:
    if config.mixed:
        return _mixed_case_struct(config, index, features, layout)
    d = d_dtype(config.act, config.out, config.fusion)
    act, weight, out = (DTYPES[config.act], DTYPES[config.weight], DTYPES[d])
    swap_ab, finalize = str(config.swap_ab).lower(), str(config.fusion == "finalize").lower()
    activation = str(config.fusion == "activation").lower()
    return f"""struct Case{index} {{  // {config.name}
  {_launcher_pointer(config, index, features, layout)}
  static constexpr int arch = {config.arch};
  static constexpr int act_bits = {act.bits}, weight_bits = {weight.bits}, out_bits = {out.bits};
  static constexpr int block_scale = {_block_scale_kind(config)};
  static constexpr bool swap_ab = {swap_ab}, finalize = {finalize}, activation = {activation};
  static constexpr bool d_scaled = {str(config.fusion == "activation" and out.mx).lower()};
  static constexpr bool dynamic_cga = {str(config.dynamic_cga).lower()};
  static constexpr bool mixed = false;
}};"""


def generate_translation_unit(
    configs: Sequence[KernelConfig], features: ReleaseFeatures, flashinfer_version: str = "unknown"
) -> str:
    """The complete ``.cu`` file: launcher include + the instantiations + harness + case table,
    for the release whose pieces ``features`` lists (:func:`.features.release_features`).

    Several configurations share one file as in FlashInfer's generated files (one front-end
    pass for all of them); they must be for one arch, whose flags they share.
    ``flashinfer_version`` is only echoed into verdict.json's ``config``.

    A unit of one instantiation (:func:`harness_apart`) holds two translation units, which the
    build compiles side by side and links (:mod:`.buildscript`): the kernel, exactly as
    FlashInfer's generated file has it, and, where :data:`HARNESS_PART` is defined, the harness
    that runs it, which names the instantiated launcher without instantiating it. So the
    harness's own device and host code (its kernels, file handling) are off the kernel's
    compile, the critical path of a cold first verdict; either way the kernels are compiled as
    FlashInfer compiles them.
    """
    apart = harness_apart(len(dict.fromkeys(configs)))
    return _unit(configs, features, flashinfer_version, "apart" if apart else "together")


def probe_unit(configs: Sequence[KernelConfig], features: ReleaseFeatures) -> str:
    """:func:`generate_translation_unit` of ``configs`` without their instantiations: the harness,
    instantiated for each case, and the generated declarations (types, the launcher's signature),
    with the launcher named but never instantiated. Its host front end (seconds, not the minutes
    of a kernel) says whether the tool can build these families against a release: an error there
    is the tool's, never a kernel's."""
    return _unit(configs, features, "probe", "probe")


def _unit(
    configs: Sequence[KernelConfig], features: ReleaseFeatures, flashinfer_version: str, layout: Layout
) -> str:
    configs = list(dict.fromkeys(configs))
    if not configs:
        raise ValueError("a translation unit needs at least one configuration")
    if len({c.arch for c in configs}) > 1:  # the nvcc flags are the arch's (arch_nvcc_flags)
        raise ValueError("configurations of one translation unit must be for one arch")
    if len({c.mixed for c in configs}) > 1:  # as FlashInfer's files, one launcher per file
        raise ValueError("SM90 mixed-input and uniform configurations cannot share a translation unit")
    # the interleave kernels where the release's mainloop reads B interleaved (none before 0.6.12)
    interleaved = configs[0].mixed and features.mixed_weights == "interleaved"
    utils = f'#include "{MIXED_UTILS_CU}"' if interleaved else ""
    launcher = f'#include "{MIXED_LAUNCHER_INL}"' if configs[0].mixed else f'#include "{LAUNCHER_INL}"'
    instantiations = "" if layout == "probe" else "\n".join(instantiation(c, features) for c in configs)
    structs = "\n".join(_case_struct(c, i, features, layout) for i, c in enumerate(configs))
    entries = []
    for i, c in enumerate(configs):
        config_json = json.dumps({**c.as_dict(), "flashinfer_version": flashinfer_version})
        entries.append(
            f'    {{"{c.name}", R"tileconform({config_json})tileconform", '
            f"&tileconform::run_case<tileconform::cases::Case{i}>}},"
        )
    names = ", ".join(c.name for c in configs)
    table = "\n".join(entries)
    pairs = [(i, configs.index(p)) for i, c in enumerate(configs) if (p := sequence_partner(c)) in configs]
    partners = "\n".join(
        f"template <> struct SequencePartner<cases::Case{i}> {{ using type = cases::Case{j}; }};"
        for i, j in pairs
    )
    kernels = f"""namespace tensorrt_llm
{{
namespace kernels
{{
namespace cutlass_kernels_oss
{{
{instantiations}

}} // namespace cutlass_kernels_oss
}} // namespace kernels
}} // namespace tensorrt_llm
"""
    harness = f"""{harness_defines(features)}
#include "harness.cu"
{'#include "harness_mixed.h"' if configs[0].mixed else ""}

namespace tileconform::cases {{
{structs}
}}  // namespace tileconform::cases

namespace tileconform {{  // GEMM 1 -> GEMM 2 of the sequence stage (harness_sequence.h)
{partners}
}}  // namespace tileconform

const tileconform::CaseEntry tileconform::kCases[] = {{
{table}
}};
const int tileconform::kCaseCount = {len(configs)};
"""
    head = f"""// Generated by pytest_tileconform.flashinfer.codegen for {names}. Do not edit.
// harness sources sha256 {harness_fingerprint()}
#include "cudart_probe.h"
"""
    if layout != "apart":  # one translation unit (a probe's front ends are what it asks for)
        return f"{head}{launcher}\n{utils}\n{kernels}\n{harness}"
    return f"""{head}#ifndef {HARNESS_PART}  // the kernels, as FlashInfer's generated file has them
{launcher}
{kernels}
{_launcher_variables(configs, features, define=True)}
#else  // the harness (the build's second translation unit)
{launcher}
{utils}
{_launcher_variables(configs, features, define=False)}
{harness}#endif
"""
