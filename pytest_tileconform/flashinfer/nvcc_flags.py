"""FlashInfer's nvcc command for a harness: the flags of its JIT build of the fused-MoE module.

The flags are FlashInfer's own, grouped below by where FlashInfer writes them
(``flashinfer/jit/core.py``, ``jit/cpp_ext.py``, ``jit/fused_moe.py``,
``compilation_context.py``). They differ between releases (``-DCUTLASS_ENABLE_GDC_FOR_SM100=1``
and ``..._SM90=1`` from 0.6.8 on, SM120's ``compute_120f`` instead of ``compute_120a`` from 0.6.7
on), so for a
release's sources :func:`module_nvcc_flags` and :func:`sm12x_gencode_suffix` read how that
release builds its module, from its own files (parsed, never executed); the built-in lists are
what the release does not say.

A release's flags are input, not configuration: whoever publishes (or plants) a release's
``jit/fused_moe.py`` would otherwise choose nvcc's options, and some run programs at compile
time (``-ccbin``, ``--compiler-bindir``, ``-Xcompiler=-B...``), even under ``--tile-device
compile``. Each one read from a release must match :data:`RELEASE_FLAGS`, the kinds of option
FlashInfer's module flags are made of (macros, targets, optimisation); anything else stops the
session with one line naming the flag and the file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ..archs import arch_name
from ..verdict import UnusableEnvironment
from .codegen import HARNESS_DIR
from .configs import KernelConfig, UnsupportedConfig, check_config
from .pysource import parse_file
from .sources import FlashInferSources, cuda_version, find_cublas_include, find_cuda_home

# Flags of FlashInfer's JIT build for the SM90 fused-MoE module, grouped by where they come from.
# gen_jit_spec (flashinfer/jit/core.py), non-debug build, default FLASHINFER_NVCC_THREADS=1:
_JIT_SPEC_CUDA_FLAGS = [
    "-std=c++17",
    "--threads=1",
    "-use_fast_math",
    "-Xfatbin=-compress-all",
    "--compress-mode=size",
    "-DFLASHINFER_ENABLE_F16",
    "-DFLASHINFER_ENABLE_BF16",
    "-DFLASHINFER_ENABLE_FP8_E4M3",
    "-DFLASHINFER_ENABLE_FP8_E5M2",
    "-DNDEBUG",
    "-O3",
]
# build_cuda_cflags (flashinfer/jit/cpp_ext.py); the stub flag is added for CUDA >= 12.8:
_BUILD_CUDA_FLAGS = ["--compiler-options=-fPIC", "--expt-relaxed-constexpr"]
_STATIC_TEMPLATE_STUB_FLAG = "-static-global-template-stub=false"
# CompilationContext.COMMON_NVCC_FLAGS (flashinfer/compilation_context.py), the non-gencode
# global flags build_cuda_cflags keeps when a module brings its own -gencode, and
# common_nvcc_flags (flashinfer/jit/core.py):
COMMON_NVCC_FLAGS = ["-DFLASHINFER_ENABLE_FP8_E8M0", "-DFLASHINFER_ENABLE_FP4_E2M1"]
# sm90a_nvcc_flags (flashinfer/jit/core.py):
SM90A_NVCC_FLAGS = [
    "-gencode=arch=compute_90a,code=sm_90a",
    "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",
    *COMMON_NVCC_FLAGS,
]


def sm90_fused_moe_flags(cuda: tuple[int, int]) -> list[str]:
    """``nvcc_flags`` of ``gen_cutlass_fused_moe_sm90_module`` (flashinfer/jit/fused_moe.py).

    Left out: ``-DFLASHINFER_SM90_MOE_PREBUILT_D_DESCRIPTOR=1``, which FlashInfer adds only on
    H20 (78 SMs) and which only the mixed-input launcher reads.
    """
    return [
        *SM90A_NVCC_FLAGS,
        "-DCOMPILE_HOPPER_TMA_GEMMS",
        "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS",
        "-DENABLE_BF16",
        "-DENABLE_FP8",
        *(["-DENABLE_FP8_BLOCK_SCALE"] if cuda >= (12, 8) else []),
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
        "-DCUTLASS_ENABLE_GDC_FOR_SM90=1",
        "-DCUTLASS_MIXED_GEMM_FP4_FP8_PREPROCESSED_SIGNS=1",
    ]


def sm120_gencode(arch: int, cuda: tuple[int, int]) -> str:
    """The ``-gencode`` FlashInfer's ``current_compilation_context`` gives a device of ``arch``
    (``CompilationContext._normalize_cuda_arch``): ``compute_120f`` from CUDA 12.9 on, ``120a`` with
    CUDA 12.8; SM121 keeps its own ``121a`` (CUDA >= 12.9)."""
    if arch == 120:
        if cuda < (12, 8):
            raise UnsupportedConfig("SM120 requires CUDA >= 12.8")
        suffix = "120f" if cuda >= (12, 9) else "120a"
    elif arch == 121:
        if cuda < (12, 9):
            raise UnsupportedConfig("SM121 requires CUDA >= 12.9")
        suffix = "121a"
    else:
        raise ValueError(f"{arch_name(arch)} is not an SM12x arch")
    return f"-gencode=arch=compute_{suffix},code=sm_{suffix}"


def sm120_fused_moe_flags(arch: int, cuda: tuple[int, int]) -> list[str]:
    """``nvcc_flags`` of ``gen_cutlass_fused_moe_sm120_module`` (flashinfer/jit/fused_moe.py),
    followed by ``current_compilation_context.get_nvcc_flags_list([12])`` for one device of
    ``arch`` (its gencode, then CompilationContext.COMMON_NVCC_FLAGS)."""
    return [
        "-DCOMPILE_BLACKWELL_TMA_GEMMS",
        "-DCOMPILE_BLACKWELL_SM120_TMA_GROUPED_GEMMS",
        "-DENABLE_BF16",
        "-DENABLE_FP8",
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
        "-DCUTLASS_ENABLE_GDC_FOR_SM100=1",
        sm120_gencode(arch, cuda),
        *COMMON_NVCC_FLAGS,
    ]


def sm100_gencode(cuda: tuple[int, int], arch: int = 100) -> str:
    """The ``-gencode`` FlashInfer gives an SM100 or SM103 device (``_normalize_cuda_arch``: SM
    10+ gets the ``a`` suffix; the sm107 -> 100f mapping does not touch them)."""
    if cuda < (12, 8) or (arch == 103 and cuda < (12, 9)):
        raise UnsupportedConfig(f"SM{arch} requires CUDA >= {'12.9' if arch == 103 else '12.8'}")
    return f"-gencode=arch=compute_{arch}a,code=sm_{arch}a"


#: ``nvcc_flags`` of ``gen_cutlass_fused_moe_sm100_module`` (flashinfer/jit/fused_moe.py); the
#: SM103 module's are these with ``-DCOMPILE_BLACKWELL_SM103_TMA_GROUPED_GEMMS`` before the last.
SM100_MODULE_FLAGS = (
    "-DCOMPILE_BLACKWELL_TMA_GEMMS",
    "-DCOMPILE_BLACKWELL_TMA_GROUPED_GEMMS",
    "-DENABLE_BF16",
    "-DENABLE_FP8",
    "-DENABLE_FP4",
    "-DUSING_OSS_CUTLASS_MOE_GEMM",
    "-DCUTLASS_ENABLE_GDC_FOR_SM100=1",
)


def sm100_fused_moe_flags(cuda: tuple[int, int], arch: int = 100) -> list[str]:
    """``nvcc_flags`` of ``gen_cutlass_fused_moe_sm100_module`` (or ``_sm103_module``),
    followed by ``current_compilation_context.get_nvcc_flags_list([10, ...], map_sm107_to_100f=True)``
    for one such device (its gencode, then CompilationContext.COMMON_NVCC_FLAGS)."""
    module = list(SM100_MODULE_FLAGS)
    if arch == 103:
        module.insert(-1, "-DCOMPILE_BLACKWELL_SM103_TMA_GROUPED_GEMMS")
    return [*module, sm100_gencode(cuda, arch), *COMMON_NVCC_FLAGS]


def arch_nvcc_flags(config: KernelConfig, cuda: tuple[int, int]) -> list[str]:
    """The arch-specific flags of FlashInfer's fused-MoE module for ``config.arch``."""
    if config.arch == 90:
        return sm90_fused_moe_flags(cuda)
    if config.arch in (120, 121):
        return sm120_fused_moe_flags(config.arch, cuda)
    if config.arch in (100, 103):
        return sm100_fused_moe_flags(cuda, config.arch)
    raise UnsupportedConfig(f"no FlashInfer fused-MoE flags for SM{config.arch}")


# -- how a release builds its fused-MoE module -----------------------------------------------

#: gen_cutlass_fused_moe_smXX_module of flashinfer/jit/fused_moe.py, per harness arch.
MODULE_FUNCTIONS = {
    90: "gen_cutlass_fused_moe_sm90_module",
    100: "gen_cutlass_fused_moe_sm100_module",
    103: "gen_cutlass_fused_moe_sm103_module",
    120: "gen_cutlass_fused_moe_sm120_module",
    121: "gen_cutlass_fused_moe_sm120_module",
}


#: What a flag read from a release may be: a macro defined or undefined, a target, an
#: optimisation or language switch. Nothing that names a program, a path or options for
#: another tool.
RELEASE_FLAGS = re.compile(
    r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?"
    r"|-U[A-Za-z_][A-Za-z0-9_]*"
    r"|-gencode=arch=compute_\d+[af]?,code=(sm|compute)_\d+[af]?"
    r"|-O[0-3]|-std=c\+\+\d\d|-lineinfo|-use_fast_math|--use_fast_math"
    r"|--expt-relaxed-constexpr|--expt-extended-lambda|--threads=\d+"
    r"|-static-global-template-stub=(true|false)"
)


class ReleaseFlagRefused(UnusableEnvironment):
    """A release's Python asks nvcc for an option outside :data:`RELEASE_FLAGS`."""


def _flag_list(node: ast.expr, names: dict[str, list[str]]) -> list[str] | None:
    """A literal flag list (``[..] + NAME``, conditional elements taken as for CUDA >= 12.8)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _flag_list(node.left, names), _flag_list(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if not isinstance(node, ast.List):
        return None
    values: list[str] = []
    for element in node.elts:
        if isinstance(element, ast.IfExp):
            element = element.body
        try:
            value = ast.literal_eval(element)
        except ValueError:
            return None
        if isinstance(value, str) and value:
            values.append(value)
    return values


def _parse(path: Path) -> ast.Module | None:
    try:
        return parse_file(path)
    except (OSError, SyntaxError, ValueError):
        return None


def _module_lists(tree: ast.Module, names: dict[str, list[str]]) -> dict[str, list[str]]:
    """``names`` with the flag lists ``tree`` assigns at module level (``sm90a_nvcc_flags =
    [...] + common_nvcc_flags`` in ``jit/core.py``), each read with the names before it."""
    found = dict(names)
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name) and (flags := _flag_list(statement.value, found)) is not None:
                found[target.id] = flags
    return found


def module_nvcc_flags(package: Path, arch: int) -> list[str] | None:
    """The ``nvcc_flags`` list FlashInfer's ``gen_cutlass_fused_moe_smXX_module`` builds the MoE
    module of ``arch`` with, read from ``package/jit/fused_moe.py`` (the lists it names, such as
    SM90's ``sm90a_nvcc_flags``, from ``jit/core.py``'s and its own module-level assignments);
    None if it cannot be read (no such file or function, or not a literal list). A flag outside
    :data:`RELEASE_FLAGS` raises :class:`ReleaseFlagRefused`."""
    function_name = MODULE_FUNCTIONS.get(arch)
    path = package / "jit" / "fused_moe.py"
    if function_name is None or not path.is_file() or (tree := _parse(path)) is None:
        return None
    core = _parse(package / "jit" / "core.py")
    names = _module_lists(tree, _module_lists(core, {}) if core is not None else {})
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function_name:
            for statement in ast.walk(node):
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.targets[0], ast.Name)
                    and statement.targets[0].id == "nvcc_flags"
                ):
                    flags = _flag_list(statement.value, names)
                    for flag in flags or ():
                        if not RELEASE_FLAGS.fullmatch(flag):
                            raise ReleaseFlagRefused(
                                f"tileconform: {path} ({function_name}) asks nvcc for {flag!r}, not an "
                                "option a release may set (macros, -gencode targets, -O, -std): refused, "
                                "as it could run a program at compile time; judge another release"
                            )
                    return flags
    return None


def sm12x_gencode_suffix(package: Path) -> str | None:
    """``"f"`` when the release compiles SM12x as the family target (``compute_120f``, CUDA >=
    12.9), ``"a"`` when it uses ``compute_120a``; None when it cannot tell.

    Read from ``compilation_context.py``'s ``_normalize_cuda_arch``: releases before it existed
    (<= 0.6.5) append ``a`` to every SM >= 9.
    """
    path = package / "compilation_context.py"
    if not path.is_file():
        return None
    text = path.read_text(errors="replace")
    if re.search(r"""["'](0|\{minor\}|[0-9])?f["']""", text) or "compute_120f" in text:
        return "f"
    if re.search(r"""str\(minor\)\s*\+\s*["']a["']""", text):
        return "a"
    return None


def release_arch_nvcc_flags(config: KernelConfig, cuda: tuple[int, int], package: Path) -> list[str]:
    """:func:`arch_nvcc_flags` as the FlashInfer release at ``package`` (its ``flashinfer``
    directory) builds them: its own fused-MoE module flags (``jit/fused_moe.py``) and, for SM12x,
    its own gencode rule (``compute_120a`` before 0.6.7, ``compute_120f`` since). SM90's module
    list starts with ``jit/core.py``'s ``sm90a_nvcc_flags`` (its gencode and common flags), so it
    is used as it is: ``-DCUTLASS_ENABLE_GDC_FOR_SM90=1`` (PDL's waits compiled in) only where
    the release sets it (0.6.8 on), ``-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED`` from 0.6.x.
    Falls back to :func:`arch_nvcc_flags` for what the release's files do not say (sources
    without ``jit/``, an SM90 list without a gencode)."""
    module = module_nvcc_flags(package, config.arch)
    if module is None or (config.arch == 90 and not any(f.startswith("-gencode=") for f in module)):
        return arch_nvcc_flags(config, cuda)
    if config.arch == 90:
        return module
    if config.arch in (100, 103):
        return [*module, sm100_gencode(cuda, config.arch), *COMMON_NVCC_FLAGS]
    suffix = sm12x_gencode_suffix(package)
    if suffix == "a":
        if cuda < (12, 8):
            raise UnsupportedConfig(f"SM{config.arch} requires CUDA >= 12.8")
        gencode = f"-gencode=arch=compute_{config.arch}a,code=sm_{config.arch}a"
    else:
        gencode = sm120_gencode(config.arch, cuda)
    return [*module, gencode, *COMMON_NVCC_FLAGS]


def nvcc_command(
    config: KernelConfig,
    sources: FlashInferSources,
    src: Path,
    out_exe: Path,
    cuda_home: Path | None = None,
) -> list[str]:
    """Full nvcc command line that compiles ``src`` (from :func:`.codegen.generate_translation_unit`)
    and TensorRT-LLM's host support files into the harness executable ``out_exe``.

    Compile flags are FlashInfer's for the arch's fused-MoE module (see the flag lists above);
    left out are only those for its Python bindings (``-DPy_LIMITED_API``,
    ``-D_GLIBCXX_USE_CXX11_ABI`` taken from torch, Python / TVM-FFI include dirs). The runtime
    is linked statically (nvcc's default, spelled out); the CUDA driver is reached through
    ``cudaGetDriverEntryPointByVersion`` (cuTensorMapEncodeTiled), so no ``-lcuda``.
    """
    check_config(config)
    home = cuda_home if cuda_home is not None else find_cuda_home()
    cuda = cuda_version(home)
    arch_flags = release_arch_nvcc_flags(config, cuda, sources.root.parent)
    includes = [f"-I{d}" for d in (HARNESS_DIR, *sources.include_dirs)]
    system = [home / "include", *sources.system_include_dirs, find_cublas_include(home)]
    return [
        str(home / "bin" / "nvcc"),
        *_JIT_SPEC_CUDA_FLAGS,
        *includes,
        *(arg for d in system for arg in ("-isystem", str(d))),
        *_BUILD_CUDA_FLAGS,
        *([_STATIC_TEMPLATE_STUB_FLAG] if cuda >= (12, 8) else []),
        *COMMON_NVCC_FLAGS,
        *arch_flags,
        "--cudart=static",
        str(src),
        *(str(p) for p in sources.common_sources),
        "-o",
        str(out_exe),
    ]
