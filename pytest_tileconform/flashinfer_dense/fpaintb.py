"""FlashInfer's SM90 fpA_intB GEMM (TensorRT-LLM's CUTLASS mixed-input GEMM: bf16/fp16
activations times int4/int8 weights with per-channel or per-group scales): what FlashInfer's JIT
instantiates and which tactics its runner offers, both read from FlashInfer's own code.

* What is instantiated: ``generate_sm90_mixed_gemm_operations`` of FlashInfer's kernel generator
  (``jit/gemm/cutlass/generate_kernels.py``, loaded as the MoE backend loads it, never importing
  ``flashinfer``): ``generate_gemm_operations`` writes these ``GemmKind.Gemm`` operations for
  SM90 into files that include ``fpA_intB_launcher_sm90.inl``, and
  ``gen_cutlass_fused_moe_sm90_module`` (``jit/fused_moe.py``) compiles them with its flags. A
  unit here is the file FlashInfer's ``get_file_content`` renders for one operation. FlashInfer
  0.7.4 exposes no Python call that runs them: the runner is TensorRT-LLM's
  ``CutlassFpAIntBGemmRunner``, shipped in FlashInfer's sources.
* What is offered: that runner's ``getConfigs()`` on SM90, which asks TensorRT-LLM's heuristic
  (``get_candidate_configs``, ``cutlass_heuristic.cpp``) for ``HOPPER | WEIGHT_ONLY``. The list
  is FlashInfer's answer, not a reading of it: ``harness/fpA_intB_tactics.cpp`` is compiled from
  FlashInfer's heuristic into the build cache and run on the host; a tactic's id is its index.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compile.cache import BuildCache, BuildSpec, CacheUnusable, Roots, portable
from ..compile.signing import SigningError
from ..dtypes import DTYPES, from_library, shape_label
from ..flashinfer.generator import GeneratorError, load_generator
from ..flashinfer.nvcc_flags import (
    _BUILD_CUDA_FLAGS,
    _JIT_SPEC_CUDA_FLAGS,
    _STATIC_TEMPLATE_STUB_FLAG,
    COMMON_NVCC_FLAGS,
    module_nvcc_flags,
    sm90_fused_moe_flags,
)
from ..flashinfer.pysource import parse_file
from ..flashinfer.sources import (
    FlashInferSources,
    build_roots,
    cuda_version,
    find_cublas_include,
)
from ..flashinfer.tactics.offered import host_probe_spec
from ..matrix.cases import Case
from .axes import DenseAxes
from .offered import DenseSourcesError
from .unit import NotOffered, harness_fingerprint

Shape = tuple[int, int, int]

#: the module FlashInfer compiles these operations into, and the name of this family's harness
MODULE = "fpA_intB_gemm_sm90"
HARNESS_DIR = Path(__file__).resolve().parent / "harness"
PROBE_SOURCE = HARNESS_DIR / "fpA_intB_tactics.cpp"
#: the activations and weights of this family (W4A16, W8A16); the generator's fp8 x int4 (W4A8)
#: is another
ACTIVATIONS = ("bf16", "fp16")
WEIGHTS = ("int4", "int8")
#: TrtLlm_QuantOp names of the generator -> the case's scale layout: per output channel, or per
#: group of ``group`` elements along K (scales only; with zero points is not judged here)
QUANT_OPS = {"per_column_scale_only": "per_column", "finegrained_scale_only": "finegrained"}
#: a probe compile: host code only, about 65 s and 2 GB on one core (as the MoE probe's)
PROBE_RAM = 2_500_000_000


@dataclass(frozen=True)
class MixedOp:
    """One operation of ``generate_sm90_mixed_gemm_operations``: a kernel FlashInfer instantiates."""

    act: str
    weight: str
    out: str
    quant: str  # per_column | finegrained | finegrained_zeros
    tile: Shape  # CTA M x N x K, K in elements
    cluster: Shape
    file: str  # get_file_content of this one operation: the unit's FlashInfer part

    @property
    def launcher(self) -> str:
        """The launcher exactly as the file instantiates it (its template arguments)."""
        found = re.search(r"template void (\w+<.*>)\s*\(", self.file, re.S)
        if found is None:
            raise DenseSourcesError(f"FlashInfer's fpA_intB instantiation has no launcher: {self.file[:200]}")
        return "tensorrt_llm::kernels::cutlass_kernels_oss::" + " ".join(found[1].split())


@dataclass(frozen=True)
class MixedTactic:
    """One entry of ``CutlassFpAIntBGemmRunner::getConfigs()`` on SM90."""

    index: int
    tile_bytes: Shape  # the CutlassTileConfigSM90 enum's CtaShapeMxNxKB
    cluster: Shape
    #: the runner's last, CUDA-core kernel config: its gemm() runs it as the CUTLASS tactic of the
    #: same tile and cluster (TensorRT-LLM's plugins read the flag, FlashInfer has none)
    cuda_kernel: bool

    def tile(self, act: str) -> Shape:
        """The CTA shape in elements of ``act``: sm90_dispatch_gemm_to_cutlass's K tile is
        ``128 / sizeof(ActivationType)``, the enum's K bytes."""
        m, n, k = self.tile_bytes
        return (m, n, k * 8 // DTYPES[act].bits)

    @property
    def tile_name(self) -> str:
        return "CtaShape{}x{}x{}B".format(*self.tile_bytes)

    @property
    def cluster_name(self) -> str:
        return "ClusterShape_{}x{}x{}".format(*self.cluster)


@dataclass(frozen=True)
class MixedFamily:
    ops: tuple[MixedOp, ...]
    tactics: tuple[MixedTactic, ...]

    def tactic(self, act: str, tile: Shape, cluster: Shape) -> MixedTactic | None:
        """The first CUTLASS tactic of ``tile`` (in ``act``'s elements) and ``cluster``."""
        return next(
            (t for t in self.tactics if (t.tile(act), t.cluster) == (tile, cluster) and not t.cuda_kernel),
            None,
        )

    def op(self, act: str, weight: str, out: str, quant: str, tile: Shape, cluster: Shape) -> MixedOp | None:
        wanted = (act, weight, out, quant, tile, cluster)
        return next(
            (o for o in self.ops if (o.act, o.weight, o.out, o.quant, o.tile, o.cluster) == wanted), None
        )


# -- what the generator instantiates -------------------------------------------------------------


def _launcher_inl(script: Path) -> str:
    """The ``fpA_intB_inl`` path ``generate_gemm_operations`` includes in the SM90 GEMM files."""
    tree = parse_file(script)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "fpA_intB_inl"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise DenseSourcesError(f"{script}: generate_gemm_operations names no fpA_intB_inl")


def _name(value: Any) -> str | None:
    return from_library(str(getattr(value, "name", value)))


def read_ops(sources: FlashInferSources) -> tuple[MixedOp, ...]:
    """The W4A16/W8A16 operations FlashInfer's generator instantiates for SM90, in its order."""
    try:
        generator = load_generator(sources)
        script = sources.generate_kernels_py
        assert script is not None  # load_generator refuses sources without it
        inl = _launcher_inl(script)
        ops = list(generator.generate_sm90_mixed_gemm_operations())
    except GeneratorError as exc:
        raise DenseSourcesError(str(exc)) from None
    except Exception as exc:  # whatever the generator's own code raises
        raise DenseSourcesError(f"FlashInfer's generate_sm90_mixed_gemm_operations failed: {exc}") from exc
    found = []
    for op in ops:
        act, weight, out = _name(op.act_type), _name(op.weight_type), _name(op.output_type)
        quant = str(getattr(op.quant_op, "name", op.quant_op))
        if act not in ACTIVATIONS or weight not in WEIGHTS or out is None:
            continue
        found.append(
            MixedOp(
                act=act,
                weight=weight,
                out=out,
                quant=QUANT_OPS.get(quant, quant),
                tile=tuple(int(v) for v in op.cta_shape),  # type: ignore[arg-type]
                cluster=tuple(int(v) for v in op.cga_shape),  # type: ignore[arg-type]
                file=generator.get_file_content([inl], [op]),
            )
        )
    if not found:
        raise DenseSourcesError("FlashInfer's generator instantiates no SM90 fpA_intB GEMM for bf16/fp16")
    return tuple(found)


# -- what the runner offers ------------------------------------------------------------------------


def probe_spec(sources: FlashInferSources, cuda_home: Path, cache_dir: Path) -> BuildSpec:
    """The probe's build: the heuristic and TensorRT-LLM's host support files, host code only."""
    return host_probe_spec(
        sources,
        cuda_home,
        cache_dir,
        source=PROBE_SOURCE.read_text(),
        defines=("-DENABLE_BF16", "-DENABLE_FP8"),
        label="fpA_intB tactics probe (FlashInfer's heuristic, host only)",
        ram_bytes=PROBE_RAM,
    )


def parse_tactics(lines: Sequence[str]) -> tuple[MixedTactic, ...]:
    """The probe's JSON lines, in order; a line out of shape is a DenseSourcesError."""
    tactics: list[MixedTactic] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tactic = MixedTactic(
                index=int(row["tactic"]),
                tile_bytes=_triple(row["tile_bytes"]),
                cluster=_triple(row["cluster"]),
                cuda_kernel=bool(row["cuda_kernel"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise DenseSourcesError(
                f"fpA_intB tactics probe line {number} unreadable ({exc}): {line[:200]}"
            ) from None
        if tactic.index != len(tactics):
            raise DenseSourcesError(
                f"fpA_intB tactics probe line {number}: tactic {tactic.index} out of order"
            )
        tactics.append(tactic)
    if not tactics:
        raise DenseSourcesError("FlashInfer's heuristic offers no SM90 fpA_intB tactic")
    return tuple(tactics)


def _triple(value: Any) -> Shape:
    if not isinstance(value, list) or len(value) != 3 or not all(type(v) is int for v in value):
        raise TypeError(f"expected three integers, not {value!r:.60}")
    return (value[0], value[1], value[2])


def offered_tactics(
    sources: FlashInferSources, cuda_home: Path, cache_dir: Path, cache: BuildCache
) -> tuple[MixedTactic, ...]:
    """FlashInfer's SM90 fpA_intB tactic list: the probe built into ``cache`` (once) and run."""
    spec = probe_spec(sources, cuda_home, cache_dir)
    try:
        result = cache.build([spec], 1)[spec.key]
    except (CacheUnusable, SigningError) as exc:
        raise DenseSourcesError(f"the fpA_intB tactics probe: {exc}") from None
    if not result.ok:
        raise DenseSourcesError(f"building the fpA_intB tactics probe failed: {result.first_error}")
    try:
        run = subprocess.run(
            [str(result.runnable())], capture_output=True, text=True, timeout=120, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise DenseSourcesError(f"the fpA_intB tactics probe did not run: {exc}") from None
    return parse_tactics(run.stdout.splitlines())


def read_family(
    sources: FlashInferSources, cuda_home: Path, cache_dir: Path, cache: BuildCache
) -> MixedFamily:
    return MixedFamily(read_ops(sources), offered_tactics(sources, cuda_home, cache_dir, cache))


# -- the unit ------------------------------------------------------------------------------------


def unit_source(op: MixedOp, tactic: MixedTactic, version: str) -> str:
    """FlashInfer's file for ``op``, then the harness, told the launcher and the tactic."""
    return "\n".join(
        [
            f"// {MODULE}: FlashInfer {version}'s generate_sm90_mixed_gemm_operations, rendered by its "
            f"get_file_content ({op.act}x{op.weight}-{op.out} {op.quant} {shape_label(op.tile)} "
            f"cluster {shape_label(op.cluster)}; tactic {tactic.index})",
            op.file,
            f"// harness sources {harness_fingerprint()}",
            f"#define TILECONFORM_LAUNCHER {op.launcher}",
            f"#define TILECONFORM_TILE_NAME {tactic.tile_name}",
            f"#define TILECONFORM_CLUSTER_NAME {tactic.cluster_name}",
            f'#include "{MODULE}.h"',
            "",
        ]
    )


def module_flags(sources: FlashInferSources, cuda_home: Path) -> list[str]:
    """``gen_cutlass_fused_moe_sm90_module``'s flags as these sources' ``jit/fused_moe.py`` says
    (:func:`..flashinfer.nvcc_flags.module_nvcc_flags`), the built-in list where it cannot be read."""
    read = module_nvcc_flags(sources.root.parent, 90)
    return read if read else sm90_fused_moe_flags(cuda_version(cuda_home))


def build_command(
    sources: FlashInferSources, cuda_home: Path, cache_dir: Path, runtime: Path | None
) -> tuple[tuple[str, ...], Roots]:
    """FlashInfer's JIT compile of the fused-MoE SM90 module for the unit, with TensorRT-LLM's
    host support files, into one program: linked with the virtual runtime (``runtime``;
    ``--no-compress`` keeps its cubins readable for the virtual device's kernel table) or with
    the CUDA runtime for the GPU (``None``)."""
    nvcc = cuda_home / "bin" / "nvcc"
    system = [cuda_home / "include", *sources.system_include_dirs, find_cublas_include(cuda_home)]
    link = ["--no-compress", "--cudart=none"] if runtime is not None else ["--cudart=static"]
    command = [
        str(nvcc),
        *_JIT_SPEC_CUDA_FLAGS,
        f"-I{HARNESS_DIR}",
        *(f"-I{d}" for d in sources.include_dirs),
        *(arg for d in system for arg in ("-isystem", str(d))),
        *_BUILD_CUDA_FLAGS,
        *([_STATIC_TEMPLATE_STUB_FLAG] if cuda_version(cuda_home) >= (12, 8) else []),
        *COMMON_NVCC_FLAGS,
        *module_flags(sources, cuda_home),
        *link,
        "{src}",
        *(str(p) for p in sources.common_sources),
        *([str(runtime)] if runtime is not None else []),
        "-o",
        "{out}",
    ]
    return portable(command, build_roots(sources, HARNESS_DIR, cuda_home, cache_dir))


def is_mixed(act: str, weight: str) -> bool:
    """A case of this family: a bf16/fp16 activation times int4/int8 weights."""
    return act in ACTIVATIONS and weight in WEIGHTS


def scale_group(k: int, group: int | None) -> int:
    """The launcher's ``group_size`` for a case's ``group`` axis (0 or unset: one scale per output
    channel, which the runner passes as ``k``)."""
    return group or k


def mixed_unit(family: MixedFamily, case: Case[DenseAxes], version: str) -> tuple[MixedOp, MixedTactic, str]:
    """The operation, the tactic and the unit of ``case``; NotOffered where FlashInfer's runner
    offers no such tactic or its generator instantiates no such kernel."""
    cluster = case.axes.cluster or (1, 1, 1)
    tactic = family.tactic(case.act, case.tile, cluster)
    if tactic is None:
        offered = sorted({(shape_label(t.tile(case.act)), shape_label(t.cluster)) for t in family.tactics})
        raise NotOffered(
            f"{MODULE}'s runner offers no tactic of CTA {shape_label(case.tile)} and cluster "
            f"{shape_label(cluster)}; it offers (CTA, cluster) {offered}"
        )
    quant = "finegrained" if case.axes.group else "per_column"
    op = family.op(case.act, case.weight, case.out, quant, case.tile, cluster)
    if op is None:
        raise NotOffered(
            f"FlashInfer's generator instantiates no {MODULE} kernel for {case.act} x {case.weight} -> "
            f"{case.out}, {quant} scales, CTA {shape_label(case.tile)}, cluster {shape_label(cluster)}"
        )
    return op, tactic, unit_source(op, tactic, version)
