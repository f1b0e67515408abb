"""Compatibility detection: what a FlashInfer release offers, read from its own files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.codegen import HARNESS_DIR
from pytest_tileconform.flashinfer.compat import (
    HARNESS_MACRO_PARAMS,
    generator_offers,
    harness_error,
    incompatibility,
    launcher_interface,
)
from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.nvcc_flags import (
    ReleaseFlagRefused,
    arch_nvcc_flags,
    module_nvcc_flags,
    release_arch_nvcc_flags,
    sm12x_gencode_suffix,
    sm120_fused_moe_flags,
)
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL, FlashInferSourcesError, find_sources

# The 0.5.0 .. 0.5.2 form of the macro (no EpilogueSchedule_, DYNAMIC_CGA_, SWAP_AB_) and the
# namespace those releases declared the launcher in.
OLD_MACRO = """\
#define INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(ArchTag_, DataType_, WeightType_, OutputType_, \\
                                                  EpilogueTag_, FUSION_, CTA_M_, CTA_N_, CTA_K_, \\
                                                  CGA_M_, CGA_N_, CGA_K_, MXFPX_, BIAS_)          \\
  static void launcher_##ArchTag_() {}
"""
NEW_MACRO = (
    "#define INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(                       \\\n    "
    + ", ".join(HARNESS_MACRO_PARAMS[:8])
    + ", \\\n    "
    + ", ".join(HARNESS_MACRO_PARAMS[8:])
    + ")  \\\n  static void f() {}\n"
)


def launcher(tmp_path: Path, body: str, namespace: str = "cutlass_kernels_oss") -> Path:
    data = tmp_path / "data"
    path = data / "csrc" / "nv_internal" / LAUNCHER_INL
    path.parent.mkdir(parents=True)
    path.write_text(
        "#include <x>\nnamespace tensorrt_llm {\nnamespace kernels {\n"
        f"namespace {namespace} {{\n{body}}}\n}}\n}}\n"
    )
    return data


def test_the_harness_form_is_compatible(tmp_path: Path) -> None:
    data = launcher(tmp_path, NEW_MACRO)
    assert launcher_interface(data).macro_params == HARNESS_MACRO_PARAMS
    assert incompatibility(data) is None


def test_old_macro_is_refused_saying_what_is_missing(tmp_path: Path) -> None:
    data = launcher(tmp_path, "\n\n" + OLD_MACRO, namespace="cutlass_kernels")
    reason = incompatibility(data)
    assert reason is not None
    assert reason.startswith(f"csrc/nv_internal/{LAUNCHER_INL}:7: INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM")
    assert "takes 14 parameters without EpilogueSchedule_, DYNAMIC_CGA_, SWAP_AB_" in reason
    assert "the harness writes the 17-parameter form" in reason


def test_other_namespace_and_missing_macro(tmp_path: Path) -> None:
    reason = incompatibility(launcher(tmp_path / "a", NEW_MACRO, namespace="cutlass_kernels"))
    assert reason is not None and "namespace(s) tensorrt_llm, kernels, cutlass_kernels" in reason
    reason = incompatibility(launcher(tmp_path / "b", "// nothing\n"))
    assert reason is not None and "defines no INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM macro" in reason
    reason = incompatibility(tmp_path / "c")
    assert reason is not None and reason.startswith("cannot read the MoE GEMM launcher")


FUSED_MOE = """
def gen_cutlass_fused_moe_sm120_module(use_fast_build: bool = False):
    nvcc_flags = [
        "-DCOMPILE_BLACKWELL_TMA_GEMMS",
        "-DENABLE_FP8_BLOCK_SCALE" if is_cuda_version_at_least("12.8") else "",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
    ]
    return gen(nvcc_flags)
"""

CONTEXT_A = """
class CompilationContext:
    def __init__(self):
        for device in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(device)
            if major >= 9:
                minor = str(minor) + "a"
"""
CONTEXT_F = """
    def _normalize_cuda_arch(self, major, minor):
        if major == 12:
            if is_cuda_version_at_least("12.9"):
                return (major, "0f")
        return (major, str(minor) + "a")
"""

GENERATOR = """
def generate_sm120_grouped_gemm_operations(is_arch_enabled):
    cta_shapes_mnk = [
        [128, 128, 128],
        [256, 128, 128],
    ]
    epi_fusions = [
        TrtLlm_EpilogueFusion.epilogue_fusion_none,
        TrtLlm_EpilogueFusion.epilogue_fusion_finalize,
    ]
    cga_shapes = [[1, 1, 1]]
    swap_ab = [True, False]
"""
OLD_GENERATOR = """
def generate_sm120_grouped_gemm_operations(is_arch_enabled):
    cta_shapes_mnk = [[128, 128, 128], [256, 128, 128]]
    cga_shapes = [[1, 1, 1]]
"""


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "flashinfer" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "flashinfer"


def test_module_flags_and_gencode(tmp_path: Path) -> None:
    pkg = package(tmp_path, {"jit/fused_moe.py": FUSED_MOE, "compilation_context.py": CONTEXT_A})
    assert module_nvcc_flags(pkg, 120) == [
        "-DCOMPILE_BLACKWELL_TMA_GEMMS",
        "-DENABLE_FP8_BLOCK_SCALE",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
    ]
    assert module_nvcc_flags(pkg, 90) is None  # no such function in this file
    assert sm12x_gencode_suffix(pkg) == "a"
    (pkg / "compilation_context.py").write_text(CONTEXT_F)
    assert sm12x_gencode_suffix(pkg) == "f"
    (pkg / "compilation_context.py").write_text("x = 1\n")
    assert sm12x_gencode_suffix(pkg) is None
    assert module_nvcc_flags(tmp_path / "nothing", 120) is None


def test_release_flags_follow_the_release(tmp_path: Path) -> None:
    pkg = package(tmp_path, {"jit/fused_moe.py": FUSED_MOE, "compilation_context.py": CONTEXT_A})
    flags = release_arch_nvcc_flags(nvfp4((128, 128, 128)), (13, 0), pkg)
    assert flags == [
        "-DCOMPILE_BLACKWELL_TMA_GEMMS",
        "-DENABLE_FP8_BLOCK_SCALE",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
        "-gencode=arch=compute_120a,code=sm_120a",
        "-DFLASHINFER_ENABLE_FP8_E8M0",
        "-DFLASHINFER_ENABLE_FP4_E2M1",
    ]
    (pkg / "compilation_context.py").write_text(CONTEXT_F)
    assert "-gencode=arch=compute_120f,code=sm_120f" in release_arch_nvcc_flags(
        nvfp4((128, 128, 128)), (13, 0), pkg
    )
    sm90 = KernelConfig(90, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
    assert release_arch_nvcc_flags(sm90, (13, 0), pkg) == arch_nvcc_flags(sm90, (13, 0))
    # without jit/ (a bare data folder) the built-in flags
    bare = release_arch_nvcc_flags(nvfp4((128, 128, 128)), (13, 0), tmp_path / "bare")
    assert bare == arch_nvcc_flags(nvfp4((128, 128, 128)), (13, 0))


CORE = """
common_nvcc_flags = ["-DFLASHINFER_ENABLE_FP8_E8M0"]
sm90a_nvcc_flags = ["-gencode=arch=compute_90a,code=sm_90a"] + common_nvcc_flags
"""
SM90_MOE = """
from .core import sm90a_nvcc_flags
def gen_cutlass_fused_moe_sm90_module(use_fast_build=False):
    nvcc_flags = sm90a_nvcc_flags + [
        "-DENABLE_FP4" if is_cuda_version_at_least("12.8") else "",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
    ]
    return gen_cutlass_fused_moe_module(nvcc_flags, "90", use_fast_build)
"""


def test_sm90_flags_are_the_release_s_own(tmp_path: Path) -> None:
    """SM90's module list names jit/core.py's sm90a_nvcc_flags: read from there, the release's
    flags replace the built-in ones (no -DCUTLASS_ENABLE_GDC_FOR_SM90=1 where it sets none)."""
    pkg = package(tmp_path, {"jit/fused_moe.py": SM90_MOE, "jit/core.py": CORE})
    sm90 = KernelConfig(90, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
    assert release_arch_nvcc_flags(sm90, (13, 0), pkg) == [
        "-gencode=arch=compute_90a,code=sm_90a",
        "-DFLASHINFER_ENABLE_FP8_E8M0",
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
    ]
    # the list it names is not in core.py: the release does not say, the built-in flags
    (pkg / "jit" / "core.py").write_text("x = 1\n")
    assert release_arch_nvcc_flags(sm90, (13, 0), pkg) == arch_nvcc_flags(sm90, (13, 0))
    # a name that resolves to a refused option is refused, wherever the list is written
    (pkg / "jit" / "core.py").write_text('sm90a_nvcc_flags = ["-ccbin=/tmp/x"]\n')
    with pytest.raises(ReleaseFlagRefused, match="-ccbin"):
        release_arch_nvcc_flags(sm90, (13, 0), pkg)


def nvfp4(tile: tuple[int, int, int], fusion: str = "none", swap: bool = False) -> KernelConfig:
    return KernelConfig(120, "nvfp4", "nvfp4", "bf16", tile, (1, 1, 1), swap, fusion)


def test_generator_offers(tmp_path: Path) -> None:
    pkg = package(tmp_path / "new", {"jit/gemm/cutlass/generate_kernels.py": GENERATOR})
    assert generator_offers(pkg, nvfp4((256, 128, 128), "finalize", True)) is True
    assert generator_offers(pkg, nvfp4((128, 256, 128))) is False
    old = package(tmp_path / "old", {"jit/gemm/cutlass/generate_kernels.py": OLD_GENERATOR})
    assert generator_offers(old, nvfp4((256, 128, 128))) is True
    assert generator_offers(old, nvfp4((256, 128, 128), "finalize")) is False  # no fusions listed
    assert generator_offers(old, nvfp4((256, 128, 128), swap=True)) is False  # no swap_ab then
    sm90 = KernelConfig(90, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
    assert generator_offers(pkg, sm90) is None  # not read for other archs
    assert generator_offers(tmp_path / "missing", nvfp4((256, 128, 128))) is None


def test_the_installed_release() -> None:
    try:
        sources = find_sources()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    assert incompatibility(sources.root) is None
    pkg = sources.root.parent
    flags = module_nvcc_flags(pkg, 120)
    assert flags is not None and sm120_fused_moe_flags(120, (13, 0))[: len(flags)] == flags
    assert sm12x_gencode_suffix(pkg) == "f"
    assert generator_offers(pkg, nvfp4((128, 256, 128), "finalize")) is True
    # the installed release's own flags are the built-in ones: its builds keep their cache keys
    sm100 = KernelConfig(100, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
    for config in (nvfp4((128, 256, 128)), sm100):
        assert release_arch_nvcc_flags(config, (13, 0), pkg) == arch_nvcc_flags(config, (13, 0))


def test_compile_errors_in_the_harness_are_not_verdicts(tmp_path: Path) -> None:
    ours = f'{HARNESS_DIR}/harness.cu(412): error: class has no member "use_reduction"'
    assert harness_error(ours)
    assert harness_error(f"{HARNESS_DIR}/cudart_probe.h:12:3: error: x")
    theirs = f"{tmp_path}/nv_internal/moe_gemm_tma_ws_launcher.inl(300): error: static assertion failed"
    assert not harness_error(theirs)
    assert not harness_error("nvcc fatal   : Unsupported gpu architecture 'compute_120f'")
