"""FlashInfer's SM90 FP8 block-scale GEMM (``fp8_blockscale_gemm_sm90``: TensorRT-LLM's
``CutlassFp8BlockScaleGemmRunner``): what FlashInfer's JIT compiles for it and what its binding
offers, both read from FlashInfer's own code, and the unit and build of a case.

* What is compiled: ``gen_fp8_blockscale_gemm_sm90_module`` (``jit/gemm/fp8_blockscale.py``,
  parsed, never imported): its sources, its ``extra_cuda_cflags`` (``sm90a_nvcc_flags`` plus its
  own, ``-DENABLE_FP8_BLOCK_SCALE`` only from CUDA 12.8 as its condition says), its include paths
  and link flags. A unit is the harness, compiled with the module's TensorRT-LLM sources; the two
  TVM-FFI files (the binding and ``deepgemm_jit_setup.cu``) are what the harness does itself:
  the binding's runner calls, and the DeepGEMM include directory FlashInfer's Python sets. The
  runner's own ``.cu`` (the one source with kernels the runner launches) is included at the end
  of the harness's translation unit rather than compiled beside it, with the same flags: the
  virtual device reads the kernels of the program's first image only.
* What is offered: no autotuner tactic (the binding takes none). The binding instantiates one
  runner per (input, weight) pair, each writing bf16, and FlashInfer's Python lets the output
  tensor be bf16 or fp16. The runner's kernels are chosen per problem at run time: by default
  DeepGEMM's (``get_best_gemm_config``: block M and N, stages, TMA multicast, swap A and B below
  M 32), compiled by nvcc when first met and loaded through the driver; with
  ``TRTLLM_DG_ENABLED=0`` the ``Fp8Gemm`` kernels built into the module. So a case is a problem
  (its M, N, K) on one of the two dispatches, not a tactic.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..compile.cache import Roots, portable
from ..dtypes import DTYPES
from ..flashinfer.nvcc_flags import (
    _BUILD_CUDA_FLAGS,
    _JIT_SPEC_CUDA_FLAGS,
    _STATIC_TEMPLATE_STUB_FLAG,
    SM90A_NVCC_FLAGS,
)
from ..flashinfer.pysource import parse_file
from ..flashinfer.sources import FlashInferSources, build_roots, cuda_version, find_cublas_include
from ..matrix.cases import Case
from .axes import DenseAxes
from .offered import DenseSourcesError
from .unit import NotOffered, harness_fingerprint

#: the JIT generator of the module and its function, relative to the package directory
GENERATOR = Path("jit") / "gemm" / "fp8_blockscale.py"
FUNCTION = "gen_fp8_blockscale_gemm_sm90_module"
#: FlashInfer's Python entry point (its output-type check), relative to the package directory
ENTRY = Path("gemm") / "gemm_base.py"
ENTRY_FUNCTION = "fp8_blockscale_gemm_sm90"
HARNESS_DIR = Path(__file__).resolve().parent / "harness"
HARNESS = "fp8_blockscale_gemm_sm90.h"
#: the runner's source (its kernels), included by the unit
RUNNER_SOURCE = "fp8_blockscale_gemm.cu"
#: the files of the module's source list that only bind it to Python (TVM-FFI)
BINDING_ONLY = ("_binding.cu", "deepgemm_jit_setup.cu")
#: the directory FlashInfer's ``get_fp8_blockscale_gemm_runner_sm90`` gives DeepGEMM's JIT,
#: relative to ``csrc``
DEEPGEMM_INCLUDE = Path("nv_internal") / "tensorrt_llm"
_RUNNER = re.compile(r"CutlassFp8BlockScaleGemmRunner<\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*>")
#: the scale blocks of the runner: A per 1 x 128, B per 128 x 128 (its quantizers' and kernels')
SCALE_BLOCK = 128


@dataclass(frozen=True)
class BlockScaleModule:
    """``gen_fp8_blockscale_gemm_sm90_module`` as these sources write it."""

    name: str  # gen_jit_spec's name, fp8_blockscale_gemm_90
    runner: str  # the runner's .cu, as the harness includes it (relative to an include path)
    sources: tuple[
        Path, ...
    ]  # compiled beside the harness (the binding-only files and the runner's left out)
    binding: Path
    flags: tuple[str, ...]  # extra_cuda_cflags, for this toolkit
    includes: tuple[Path, ...]  # extra_include_paths
    ldflags: tuple[str, ...]
    pairs: tuple[tuple[str, str, str], ...]  # (input, weight, runner's output) the binding makes
    outs: tuple[str, ...]  # the output types FlashInfer's Python accepts

    def offers(self, act: str, weight: str, out: str) -> bool:
        return out in self.outs and any((a, w) == (act, weight) for a, w, _ in self.pairs)


def _csrc_path(node: ast.expr, csrc: Path) -> Path | None:
    """``jit_env.FLASHINFER_CSRC_DIR / "a" / "b.cu"`` -> csrc/a/b.cu."""
    parts: list[str] = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        if not (isinstance(node.right, ast.Constant) and isinstance(node.right.value, str)):
            return None
        parts.insert(0, node.right.value)
        node = node.left
    if isinstance(node, ast.Attribute) and node.attr == "FLASHINFER_CSRC_DIR" and parts:
        return csrc.joinpath(*parts)
    return None


def _flags(node: ast.expr, cuda: tuple[int, int], where: str) -> list[str]:
    """``sm90a_nvcc_flags + [...]``: the named list, literals, and ``*((..,) if
    is_cuda_version_at_least("X.Y") else ())`` decided for this toolkit."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _flags(node.left, cuda, where) + _flags(node.right, cuda, where)
    if isinstance(node, ast.Name) and node.id == "sm90a_nvcc_flags":
        return list(SM90A_NVCC_FLAGS)
    if isinstance(node, ast.List):
        flags: list[str] = []
        for element in node.elts:
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                flags.append(element.value)
            elif isinstance(element, ast.Starred) and isinstance(element.value, ast.IfExp):
                test = element.value.test
                if not (
                    isinstance(test, ast.Call)
                    and isinstance(test.func, ast.Name)
                    and test.func.id == "is_cuda_version_at_least"
                    and test.args
                    and isinstance(test.args[0], ast.Constant)
                ):
                    raise DenseSourcesError(f"{where}: a flag condition not read here: {ast.unparse(test)}")
                wanted = tuple(int(v) for v in str(test.args[0].value).split(".")[:2])
                chosen = element.value.body if cuda >= wanted else element.value.orelse
                flags += [str(v) for v in ast.literal_eval(chosen)]
            else:
                raise DenseSourcesError(f"{where}: a flag not read here: {ast.unparse(element)}")
        return flags
    raise DenseSourcesError(f"{where}: nvcc flags not read here: {ast.unparse(node)}")


def read_module(sources: FlashInferSources, cuda: tuple[int, int]) -> BlockScaleModule:
    """The module these sources' generator compiles, for a toolkit of version ``cuda``."""
    path = sources.root.parent / GENERATOR
    if not path.is_file():
        raise DenseSourcesError(f"FlashInfer's FP8 block-scale GEMM generator {path} is missing")
    tree = parse_file(path)
    function = next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == FUNCTION), None)
    if function is None:
        raise DenseSourcesError(f"{path}: no {FUNCTION}")
    where = f"{path}:{function.lineno} {FUNCTION}"
    assigned = {
        n.targets[0].id: n.value
        for n in ast.walk(function)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    }
    call = next(
        (
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "gen_jit_spec"
        ),
        None,
    )
    if call is None or len(call.args) < 2 or not isinstance(call.args[0], ast.Constant):
        raise DenseSourcesError(f"{where}: no gen_jit_spec(name, sources, ...) call")
    keywords = {k.arg: k.value for k in call.keywords if k.arg}

    def paths(node: ast.expr | None) -> list[Path]:
        found = [_csrc_path(e, sources.csrc) for e in node.elts] if isinstance(node, ast.List) else [None]
        if not found or None in found:
            raise DenseSourcesError(f"{where}: a path not under FLASHINFER_CSRC_DIR")
        return [p for p in found if p is not None]

    files = paths(call.args[1])
    binding = [p for p in files if p.name.endswith(BINDING_ONLY[0])]
    flags_node = keywords.get("extra_cuda_cflags")
    if isinstance(flags_node, ast.Name):
        flags_node = assigned.get(flags_node.id)
    if flags_node is None or len(binding) != 1:
        raise DenseSourcesError(f"{where}: expected extra_cuda_cflags and one binding .cu, found {files}")
    ldflags = keywords.get("extra_ldflags")
    includes = paths(keywords.get("extra_include_paths"))
    runner = [p for p in files if p.name == RUNNER_SOURCE]
    under = [d for d in includes for p in runner if p.is_relative_to(d)]
    if len(runner) != 1 or not under:
        raise DenseSourcesError(f"{where}: no {RUNNER_SOURCE} under its include paths in {files}")
    module = BlockScaleModule(
        name=str(call.args[0].value),
        runner=runner[0].relative_to(under[-1]).as_posix(),
        sources=tuple(p for p in files if not p.name.endswith(BINDING_ONLY) and p != runner[0]),
        binding=binding[0],
        flags=tuple(_flags(flags_node, cuda, where)),
        includes=tuple(includes),
        ldflags=tuple(ast.literal_eval(ldflags)) if ldflags is not None else (),
        pairs=_pairs(binding[0]),
        outs=_python_outs(sources.root.parent / ENTRY),
    )
    missing = [p for p in (*module.sources, *module.includes) if not p.exists()]
    if missing:
        raise DenseSourcesError(f"{where} names files these sources lack: {[str(p) for p in missing]}")
    return module


def _by_cuda_type(cuda_type: str) -> str:
    name = next((n for n, t in DTYPES.items() if t.cuda_type == cuda_type), None)
    if name is None:
        raise DenseSourcesError(f"the FP8 block-scale binding instantiates a runner of {cuda_type}")
    return name


def _pairs(binding: Path) -> tuple[tuple[str, str, str], ...]:
    """The runners the binding's constructor makes (``std::make_unique<...Runner<A, B, D>>``)."""
    text = binding.read_text()
    found = tuple(
        dict.fromkeys(
            tuple(_by_cuda_type(t) for t in m.groups())
            for m in _RUNNER.finditer(text.split("make_unique", 1)[-1])
        )
    )
    if not found:
        raise DenseSourcesError(f"{binding}: no CutlassFp8BlockScaleGemmRunner<A, B, D> instantiated")
    return found  # type: ignore[return-value]


def _python_outs(path: Path) -> tuple[str, ...]:
    """The dtypes of ``out_dtype not in [torch.X, ...]`` in FlashInfer's entry point."""
    if not path.is_file():
        raise DenseSourcesError(f"FlashInfer's GEMM entry points {path} are missing")
    tree = parse_file(path)
    function = next(
        (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == ENTRY_FUNCTION), None
    )
    by_torch = {t.storage: n for n, t in reversed(list(DTYPES.items()))}
    for node in ast.walk(function) if function is not None else ():
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == "out_dtype"
            and isinstance(node.ops[0], ast.NotIn)
            and isinstance(node.comparators[0], ast.List)
        ):
            names = [e.attr for e in node.comparators[0].elts if isinstance(e, ast.Attribute)]
            return tuple(by_torch.get(n, n) for n in names)
    raise DenseSourcesError(f"{path}: {ENTRY_FUNCTION} checks no out_dtype against a list")


def is_blockscale(case: Case[DenseAxes]) -> bool:
    """A case of this family: one with a dispatch (the family's own axis)."""
    return case.axes.dispatch is not None


def check_case(module: BlockScaleModule, case: Case[DenseAxes]) -> None:
    """NotOffered where FlashInfer offers no such GEMM: a pair its binding has no runner for, an
    output type its Python refuses, weight scales on a weight it quantizes itself, or a problem
    its Python refuses (K a multiple of 128, N of 64)."""
    _, n, k = case.axes.mnk
    if case.arch != "sm90":
        raise NotOffered(f"{module.name} is built for sm90 only (sm90a_nvcc_flags), not {case.arch}")
    if not module.offers(case.act, case.weight, case.out):
        raise NotOffered(
            f"{module.name}'s binding runs (input, weight) {[p[:2] for p in module.pairs]} into "
            f"{list(module.outs)}, not {case.act} x {case.weight} -> {case.out}"
        )
    if (case.weight == "fp8_e4m3") != (case.axes.b_scales is not None):
        raise NotOffered(
            "fp8 weights come with their scales (b_scales), bf16 weights are quantized by the runner"
        )
    if k % SCALE_BLOCK or n % 64:
        raise NotOffered(f"FlashInfer's {ENTRY_FUNCTION} refuses K={k} (a multiple of 128) or N={n} (of 64)")


def unit_source(module: BlockScaleModule, version: str) -> str:
    """The harness, then the runner's source, named with the module and the harness's digest (one
    unit for every case)."""
    return "\n".join(
        [
            f"// {module.name}: FlashInfer {version}'s {FUNCTION}, its other sources compiled beside this",
            f"// harness sources {harness_fingerprint()}",
            f'#include "{HARNESS}"',
            f'#include "{module.runner}"',
            "",
        ]
    )


def build_command(
    sources: FlashInferSources,
    module: BlockScaleModule,
    cuda_home: Path,
    cache_dir: Path,
    runtime: Path | None,
) -> tuple[tuple[str, ...], Roots]:
    """FlashInfer's JIT compile of the module (its sources, include paths, flags and link flags)
    with the harness in place of the binding, into one program: for the GPU (``runtime`` None)
    with the CUDA runtime, else with the virtual runtime and ``TILECONFORM_VIRTUAL`` (the
    harness's stand-ins for the driver's library loading and NVRTC, which the virtual device
    lacks and the built-in dispatch never calls)."""
    nvcc = cuda_home / "bin" / "nvcc"
    system = [cuda_home / "include", *sources.system_include_dirs, find_cublas_include(cuda_home)]
    link = (
        ["--no-compress", "--cudart=none", "-DTILECONFORM_VIRTUAL"]
        if runtime is not None
        else ["--cudart=static"]
    )
    # the link flags after the objects that need them, as FlashInfer's ninja build orders them
    libraries = [str(runtime)] if runtime is not None else list(module.ldflags)
    command = [
        str(nvcc),
        *_JIT_SPEC_CUDA_FLAGS,
        f"-I{HARNESS_DIR}",
        *(f"-I{d}" for d in dict.fromkeys([*module.includes, *sources.include_dirs])),
        *(arg for d in system for arg in ("-isystem", str(d))),
        *_BUILD_CUDA_FLAGS,
        *([_STATIC_TEMPLATE_STUB_FLAG] if cuda_version(cuda_home) >= (12, 8) else []),
        *module.flags,
        *link,
        "{src}",
        *(str(p) for p in module.sources),
        *libraries,
        "-o",
        "{out}",
    ]
    return portable(command, build_roots(sources, HARNESS_DIR, cuda_home, cache_dir))


def harness_args(case: Case[DenseAxes], sources: FlashInferSources) -> tuple[str, ...]:
    """The harness's arguments after the run directory (see the harness's usage)."""
    m, n, k = case.axes.mnk
    return (
        str(case.axes.dispatch),
        case.act,
        case.weight,
        str(m),
        str(n),
        str(k),
        case.axes.b_scales or "none",
        str(sources.csrc / DEEPGEMM_INCLUDE),
    )


def run_env(cuda_home: Path, cache_dir: Path) -> dict[str, str]:
    """Where DeepGEMM's JIT finds nvcc and keeps its cubins on a GPU (in the build cache's
    folder, so a rerun finds them); the harness sets the dispatch itself."""
    return {
        "CUDA_HOME": str(cuda_home),
        "TRTLLM_DG_CACHE_DIR": str(cache_dir / "deepgemm"),
    }
