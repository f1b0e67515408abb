"""FlashInfer's own answer to "which MoE GEMM tactics do you offer, and does your dispatch take them?"

``probe/tactics.cu`` is compiled once per (FlashInfer sources, nvcc) into the build cache, like a
harness, from FlashInfer's headers plus TensorRT-LLM's ``cutlass_heuristic.cpp`` and the three
host support files, and run on the CPU: it calls ``MoeGemmRunner<...>::getConfigs`` (which calls
``get_candidate_configs`` of the heuristic) and, for every TMA warp-specialized tactic,
``dispatchMoeGemmSelectTileShapeTmaWarpSpecialized`` as the workspace query calls it, with the
launcher template defined to record the instantiation the dispatch selected instead of running
it. See the comment at the top of ``probe/tactics.cu`` for the output.

The tactic ids are those of FlashInfer's autotuner for ``cutlass_fused_moe``
(``MoERunner``): GEMM 1's tactics first, GEMM 2's numbered after them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compile.cache import BuildCache, BuildSpec, CacheUnusable
from ..compile.signing import SigningError
from ..dtypes import dtype, label_dtypes, tile_k_elements
from .nvcc_flags import COMMON_NVCC_FLAGS
from .sources import FlashInferSources, build_salt, find_cublas_include, find_cuda_home

PROBE_SOURCE = Path(__file__).resolve().parent / "probe" / "tactics.cu"
HEURISTIC_CPP = "tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.cpp"
#: RAM the probe's compile is planned with: it takes about 65 s and a peak of 2 GB on one core
#: (nvcc 13.0, FlashInfer 0.7.4)
PROBE_RAM = 2_500_000_000
#: architectures the probe is asked about (SM103 is left out: its dispatch branch depends on a
#: macro of FlashInfer's separate SM103 module)
PROBE_SMS = {"sm90": 90, "sm100": 100, "sm120": 120, "sm121": 121}


class ProbeError(RuntimeError):
    """The tactics probe could not be built or run."""


@dataclass(frozen=True)
class Tactic:
    """One entry of CutlassMoeFCRunner::getTactics for one runner (dtype combination)."""

    sm: int
    runner: str  # dtype label as case ids spell it: bf16, fp8_e4m3-bf16, nvfp4-bf16, mxfp8xmxfp4-bf16
    gemm: int  # 1 or 2
    tactic: int  # the autotuner's tactic id
    tma_ws: bool
    tile_bytes: tuple[int, int, int] | None
    cluster: tuple[int, int, int] | None
    dynamic_cluster: tuple[int, int, int] | None
    epilogue_schedule: int | None
    fusion: str
    swap_ab: bool
    dispatch: str  # accepted | rejected | not_tma
    instantiation: dict[str, Any] | None
    error: str

    @property
    def act(self) -> str:
        return label_dtypes(self.runner)[0]

    def tile_elements(self) -> tuple[int, int, int] | None:
        """The CTA tile in elements of the activation (what the dispatch's SHAPE_CASE computes)."""
        if self.instantiation is not None:
            return tuple(self.instantiation["tile"])
        if self.tile_bytes is None:
            return None
        m, n, k = self.tile_bytes
        return (m, n, tile_k_elements(k, self.act))


def _triple(value: Any) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 3:
        raise TypeError(f"expected a list of three integers, not {value!r:.60}")
    return (_int(value[0]), _int(value[1]), _int(value[2]))


def _int(value: Any) -> int:
    """An integer field: a JSON integer (``true`` and ``1.5`` are not)."""
    if type(value) is not int:
        raise TypeError(f"expected an integer, not {value!r:.60}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {value!r:.60}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, not {value!r:.60}")
    return value


def _tactic(row: dict[str, Any]) -> Tactic:
    """One line's tactic; KeyError names a missing field, TypeError a wrong-typed one."""
    instantiation = row.get("instantiation")
    if instantiation is not None:
        if not isinstance(instantiation, dict):
            raise TypeError(f"instantiation: expected an object, not {instantiation!r:.60}")
        if _triple(instantiation.get("tile")) is None:  # the one field read from it
            raise TypeError("instantiation: no tile")
    epilogue = row.get("epilogue_schedule")
    runner = _str(row["runner"])
    try:  # the commands read the runner's dtypes: one they do not know is this line's fault
        for name in label_dtypes(runner):
            dtype(name)
    except ValueError as exc:
        raise TypeError(f"runner {runner!r}: {exc}") from None
    return Tactic(
        sm=_int(row["sm"]),
        runner=runner,
        gemm=_int(row["gemm"]),
        tactic=_int(row["tactic"]),
        tma_ws=_bool(row["tma_ws"]),
        tile_bytes=_triple(row.get("tile_bytes")),
        cluster=_triple(row.get("cluster")),
        dynamic_cluster=_triple(row.get("dynamic_cluster")),
        epilogue_schedule=None if epilogue is None else _int(epilogue),
        fusion=_str(row.get("fusion", "none")),
        swap_ab=_bool(row.get("swap_ab", False)),
        dispatch=_str(row["dispatch"]),
        instantiation=instantiation,
        error=_str(row.get("error", "")),
    )


def parse(lines: Sequence[str]) -> list[Tactic]:
    """The tactics of the probe's JSON lines (or of a saved copy of them).

    Every way a line can be wrong (not JSON, nested too deeply, not an object, a field missing
    or of the wrong type) is a :class:`ProbeError` that names the line, so a hostile or damaged
    file ends in one message, never in another exception."""
    tactics = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ProbeError(
                f"tactics probe output line {number} is not JSON: {exc.msg}: {line[:200]}"
            ) from None
        except RecursionError:
            raise ProbeError(f"tactics probe output line {number}: JSON nested too deeply") from None
        if not isinstance(row, dict):
            raise ProbeError(f"tactics probe output line {number}: expected a JSON object, not {line[:200]}")
        if "offered_error" in row:
            raise ProbeError(
                f"FlashInfer's getConfigs failed for sm{row.get('sm')} {row.get('runner')} GEMM "
                f"{row.get('gemm')}: {row['offered_error']}"
            )
        try:
            tactics.append(_tactic(row))
        except KeyError as exc:
            raise ProbeError(f"tactics probe output line {number}: no {exc.args[0]!r}") from None
        except TypeError as exc:
            raise ProbeError(f"tactics probe output line {number}: {exc}") from None
    return tactics


def probe_spec(sources: FlashInferSources, cuda_home: Path, salt: str) -> BuildSpec:
    includes = [f"-I{d}" for d in sources.include_dirs]
    system = [cuda_home / "include", *sources.system_include_dirs, find_cublas_include(cuda_home)]
    command = [
        str(cuda_home / "bin" / "nvcc"),
        "-std=c++17",
        "-O1",
        "-DNDEBUG",
        "--expt-relaxed-constexpr",
        *includes,
        *(arg for d in system for arg in ("-isystem", str(d))),
        *COMMON_NVCC_FLAGS,
        "-DENABLE_BF16",
        "-DENABLE_FP8",
        "-DENABLE_FP4",
        "-DUSING_OSS_CUTLASS_MOE_GEMM",
        # every arch's TMA WS dispatch branch is compiled in (as FlashInfer's modules do per arch);
        # no kernel is compiled: the probe holds no device code
        "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS",
        "-DCOMPILE_BLACKWELL_TMA_GROUPED_GEMMS",
        "-DCOMPILE_BLACKWELL_SM120_TMA_GROUPED_GEMMS",
        "-gencode=arch=compute_90a,code=sm_90a",
        "{src}",
        str(sources.nv_internal / HEURISTIC_CPP),
        *(str(p) for p in sources.common_sources),
        "-o",
        "{out}",
    ]
    return BuildSpec(
        source=PROBE_SOURCE.read_text(),
        command=tuple(command),
        salt=salt,
        ram_bytes=PROBE_RAM,
        label="tactics probe (FlashInfer heuristic + dispatch, host only)",
    )


def build_probe(
    sources: FlashInferSources, cache_dir: Path, progress: Callable[[str], None] | None = None
) -> Path:
    """The probe executable, compiled into the build cache on first use. It is run, so it is
    checked like any harness (:mod:`..compile.trust`); a cache that cannot give a trusted one
    (read-only and lacking it, a refused folder, an unusable key) is a :class:`ProbeError`."""
    home = find_cuda_home()
    spec = probe_spec(sources, home, build_salt(sources, home, cache_dir))
    try:
        result = BuildCache(cache_dir, progress).build([spec], 1)[spec.key]
    except (CacheUnusable, SigningError) as exc:
        raise ProbeError(f"the tactics probe: {exc}") from None
    if not result.ok:
        raise ProbeError(f"building the tactics probe failed: {result.first_error} (log: {result.log})")
    return result.artifact


def probe_output(executable: Path, archs: Sequence[str]) -> list[str]:
    """The probe's JSON lines for ``archs``."""
    sms = []
    for arch in archs:
        if arch not in PROBE_SMS:
            raise ProbeError(f"the tactics probe answers for {', '.join(PROBE_SMS)}, not {arch}")
        sms.append(str(PROBE_SMS[arch]))
    try:
        proc = subprocess.run([str(executable), *sms], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ProbeError(f"running {executable} failed: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ProbeError(f"{executable} exited with status {proc.returncode}: {' | '.join(tail)}")
    return proc.stdout.splitlines()


def offered_tactics(
    sources: FlashInferSources,
    archs: Sequence[str],
    cache_dir: Path,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """The probe's output (JSON lines) for ``archs``, building the probe if needed."""
    return probe_output(build_probe(sources, cache_dir, progress), archs)
