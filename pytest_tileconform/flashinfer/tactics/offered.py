"""FlashInfer's own answer to "which MoE GEMM tactics do you offer, and does your dispatch take them?"

``probe.cu`` is compiled once per (FlashInfer sources, nvcc) into the build cache, like a
harness, from FlashInfer's headers plus TensorRT-LLM's ``cutlass_heuristic.cpp`` and the three
host support files, and run on the CPU: it calls ``MoeGemmRunner<...>::getConfigs`` (which calls
``get_candidate_configs`` of the heuristic) and, for every TMA warp-specialized tactic,
``dispatchMoeGemmSelectTileShapeTmaWarpSpecialized`` as the workspace query calls it, with the
launcher template defined to record the instantiation the dispatch selected instead of running
it. See the comment at the top of ``probe.cu`` for the output.

The tactic ids are those of FlashInfer's autotuner for ``cutlass_fused_moe`` (``MoERunner``), one
list per dtype combination: the binding (``flashinfer_cutlass_fused_moe_binding.cu``,
``FusedMoeRunner``) concatenates ``getTactics(GEMM_1)`` and ``getTactics(GEMM_2)`` into
``mAllProfiles``; ``MoERunner.get_valid_tactics`` (``flashinfer/fused_moe/core.py``) offers
``range(0, n1)`` when tuning ``trtllm::fused_moe::gemm1`` and ``range(n1, n1 + n2)`` for
``gemm2``, and ``run_moe`` takes ``[gemm1 id, gemm2 id]`` as indices into that list. So an id of
GEMM 1 is its position in GEMM 1's list and an id of GEMM 2 is n1 plus its position in GEMM 2's.
Filtering by occupancy on the device drops ids, never renumbers them. GEMM 2's list is the one
of ``use_fused_finalize=True``, FlashInfer's default.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...archs import KNOWN, arch_name, arch_number
from ...compile.cache import BuildCache, BuildSpec, CacheUnusable, portable
from ...compile.inputs import BuildInput
from ...compile.signing import SigningError
from ...dtypes import dtype, label_dtypes, tile_k_elements
from ..configs import KERNEL_ARCHES
from ..generator import kernel_arch_variant, schedule_variant
from ..nvcc_flags import COMMON_NVCC_FLAGS
from ..sources import FlashInferSources, build_salt, find_cublas_include, find_cuda_home

PROBE_SOURCE = Path(__file__).resolve().parent / "probe.cu"
HEURISTIC_CPP = "tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.cpp"
#: RAM the probe's compile is planned with: it takes about 65 s and a peak of 2 GB on one core
#: (nvcc 13.0, FlashInfer 0.7.4)
PROBE_RAM = 2_500_000_000
#: architectures the probe is asked about (SM103 is left out: its dispatch branch depends on a
#: macro of FlashInfer's separate SM103 module)
PROBE_SMS = {arch: arch_number(arch) for arch in KNOWN}
#: EpilogueScheduleType and MainloopScheduleType (cutlass_extensions/gemm_configs.h) in enum
#: order: the probe prints their numbers (:func:`numbering_digest` covers that header)
EPILOGUE_SCHEDULES = ("auto", "no_smem", "tma")
MAINLOOP_SCHEDULES = (
    "auto",
    "pingpong",
    "cooperative",
    "warpspecialized",
    "single_warpgroup_prefill",
    "single_warpgroup_rolling",
)
#: What decides FlashInfer's tactic lists and their numbering, relative to ``flashinfer/data``
#: (the heuristic, getConfigs, getTactics, the config enums, the dispatch, the binding) and to the
#: ``flashinfer`` package (``MoERunner``); a release unpacked for ``--flashinfer`` has only the
#: first five. Together with the probe's own source they key a saved probe output.
NUMBERING_SOURCES = (
    "csrc/nv_internal/" + HEURISTIC_CPP,
    "csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_template_dispatch.h",
    "csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_template_dispatch_tma_ws.h",
    "csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/include/moe_kernels.h",
    "csrc/nv_internal/tensorrt_llm/cutlass_extensions/include/cutlass_extensions/gemm_configs.h",
    "csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu",
    "../fused_moe/core.py",
)


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
    mainloop_schedule: int | None = None
    fallback_cluster: tuple[int, int, int] | None = None  # dynamic CGA: the cluster it falls back to
    tile_enum: int | None = None  # the config's tile enum (a CutlassTileConfig for SM80-style ones)

    @property
    def act(self) -> str:
        return label_dtypes(self.runner)[0]

    @property
    def epilogue(self) -> str:
        """FlashInfer's epilogue schedule (auto, no_smem, tma); "" for an SM80-style tactic."""
        return _name(EPILOGUE_SCHEDULES, self.epilogue_schedule)

    @property
    def mainloop(self) -> str:
        return _name(MAINLOOP_SCHEDULES, self.mainloop_schedule)

    @property
    def mixed_input(self) -> bool:
        """An SM90 runner of two input types: its TMA configs go to the mixed-input launcher."""
        act, weight, _ = label_dtypes(self.runner)
        return self.sm == 90 and act != weight

    @property
    def kernel_arch(self) -> int:
        """The arch of another kernel set the dispatch selected from (SM100's on sm103), else 0."""
        arch = int(self.instantiation.get("arch", 0)) if self.instantiation is not None else 0
        return arch if arch in KERNEL_ARCHES.get(self.sm, ()) else 0

    def tile_elements(self) -> tuple[int, int, int] | None:
        """The CTA tile in elements (what the dispatch's SHAPE_CASE computes: K bytes of the
        activation; SM90's mixed-input dispatch takes the enum's K as the tile's K,
        DISPATCH_MIXED_DTYPE_MOE_TILE)."""
        if self.instantiation is not None:
            return tuple(self.instantiation["tile"])
        if self.tile_bytes is None:
            return None
        m, n, k = self.tile_bytes
        return (m, n, k if self.mixed_input else tile_k_elements(k, self.act))


def _name(names: tuple[str, ...], number: int | None) -> str:
    if number is None:
        return ""
    return names[number] if 0 <= number < len(names) else f"#{number}"


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
    epilogue, mainloop, tile_enum = (
        row.get(k) for k in ("epilogue_schedule", "mainloop_schedule", "tile_enum")
    )
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
        mainloop_schedule=None if mainloop is None else _int(mainloop),
        fallback_cluster=_triple(row.get("fallback_cluster")),
        tile_enum=None if tile_enum is None else _int(tile_enum),
    )


#: The most characters of an integer the probe writes (tactic ids, enums, sizes); Python refuses
#: to convert one of more than 4,300 digits, and a line that has one is not probe output.
MAX_DIGITS = 20


class _LongInteger(ValueError):
    """A JSON integer of more than :data:`MAX_DIGITS` characters; the text is the integer."""


def _bounded_int(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise _LongInteger(text)
    return int(text)


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
            row = json.loads(line, parse_int=_bounded_int)
        except json.JSONDecodeError as exc:
            raise ProbeError(
                f"tactics probe output line {number} is not JSON: {exc.msg}: {line[:200]}"
            ) from None
        except _LongInteger as exc:
            raise ProbeError(
                f"tactics probe output line {number}: an integer of {len(str(exc)):,} digits; the probe "
                f"writes none over {MAX_DIGITS}"
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


def probe_spec(sources: FlashInferSources, cuda_home: Path, cache_dir: Path) -> BuildSpec:
    """The MoE tactics probe's build: the binding's getTactics and every arch's dispatch."""
    return host_probe_spec(
        sources,
        cuda_home,
        cache_dir,
        source=PROBE_SOURCE.read_text(),
        defines=(
            "-DENABLE_BF16",
            "-DENABLE_FP8",
            "-DENABLE_FP4",
            "-DUSING_OSS_CUTLASS_MOE_GEMM",
            # every arch's TMA WS dispatch branch is compiled in (as FlashInfer's modules do per
            # arch); no kernel is compiled: the probe holds no device code
            "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS",
            "-DCOMPILE_BLACKWELL_TMA_GROUPED_GEMMS",
            "-DCOMPILE_BLACKWELL_SM103_TMA_GROUPED_GEMMS",
            "-DCOMPILE_BLACKWELL_SM120_TMA_GROUPED_GEMMS",
        ),
        label="tactics probe (FlashInfer heuristic + dispatch, host only)",
        ram_bytes=PROBE_RAM,
    )


def host_probe_spec(
    sources: FlashInferSources,
    cuda_home: Path,
    cache_dir: Path,
    *,
    source: str,
    defines: Sequence[str],
    label: str,
    ram_bytes: int,
) -> BuildSpec:
    """The build of a probe of FlashInfer's host code (``source``: its main; ``defines``: the
    runner's ``-D`` flags): linked with FlashInfer's heuristic and TensorRT-LLM's host support
    files, no device code. FlashInfer's sources are named by placeholder and listed as the build's
    input (:mod:`...compile.inputs`), so a signed probe is compiled from checked copies."""
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
        *defines,
        "-gencode=arch=compute_90a,code=sm_90a",
        "{src}",
        str(sources.nv_internal / HEURISTIC_CPP),
        *(str(p) for p in sources.common_sources),
        "-o",
        "{out}",
    ]
    portable_command, roots = portable(command, {"flashinfer": sources.root})
    fingerprint = sources.remembered_fingerprint(cache_dir)
    return BuildSpec(
        source=source,
        command=portable_command,
        salt=build_salt(sources, cuda_home, cache_dir),
        ram_bytes=ram_bytes,
        label=label,
        roots=roots,
        inputs=(BuildInput("flashinfer", sources.root, sources.build_files, fingerprint),),
    )


def build_probe(
    sources: FlashInferSources, cache_dir: Path, progress: Callable[[str], None] | None = None
) -> Path:
    """The probe executable, compiled into the build cache on first use. It is run, so it is
    checked like any harness (:mod:`...compile.trust`); a cache that cannot give a trusted one
    (read-only and lacking it, a refused folder, an unusable key) is a :class:`ProbeError`."""
    home = find_cuda_home()
    spec = probe_spec(sources, home, cache_dir)
    try:
        result = BuildCache(cache_dir, progress).build([spec], 1)[spec.key]
    except (CacheUnusable, SigningError) as exc:
        raise ProbeError(f"the tactics probe: {exc}") from None
    if not result.ok:
        raise ProbeError(f"building the tactics probe failed: {result.first_error} (log: {result.log})")
    return result.runnable()  # the checked bytes, whatever is swapped in under its name after


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


# -- configurations and their tactic ids -------------------------------------------------------
Shape = tuple[int, int, int]


@dataclass(frozen=True, order=True)
class ConfigKey:
    """A configuration as the harness builds it and as tactics select it: dtypes, CTA tile in
    elements, cluster, swap_ab, epilogue fusion and, on SM100/SM103, the epilogue schedule variant
    (:func:`~..generator.schedule_variant`), on SM90's mixed-input kernels the mainloop."""

    dtypes: str
    tile: Shape
    cluster: Shape
    swap_ab: bool
    fusion: str
    variant: str = ""
    #: dynamic CGA: the runtime cluster
    dynamic: Shape | None = None

    @property
    def schedule(self) -> str:
        """The epilogue variant as tables print it: ``tma``, ``nosmem+dynamic 4x2x1``, "" (fixed)."""
        if self.dynamic is None:
            return self.variant
        return f"{self.variant} {'x'.join(str(v) for v in self.dynamic)}"


def tactic_key(t: Tactic) -> ConfigKey:
    """The configuration a TMA WS tactic stands for: the instantiation the dispatch selected or,
    when it rejected the tactic, the tactic's own tile (bytes -> elements) and cluster. An
    instantiation of another arch's kernel set (SM100's on sm103) gets that set's variant."""
    if t.instantiation is not None:
        inst: dict[str, Any] = t.instantiation
        # a mixed-input kernel by its mainloop, an SM10x one by its epilogue schedule
        variant = str(inst.get("mainloop") or "") or schedule_variant(
            str(inst.get("epilogue_schedule", "void")), bool(inst.get("dynamic_cga"))
        )
        variant += kernel_arch_variant(t.kernel_arch)
        return ConfigKey(
            dtypes=t.runner,
            tile=tuple(inst["tile"]),
            cluster=tuple(inst["cluster"]),
            swap_ab=bool(inst["swap_ab"]),
            fusion=str(inst["fusion"]),
            variant=variant,
            dynamic=t.dynamic_cluster if inst.get("dynamic_cga") else None,
        )
    tile = t.tile_elements()
    if tile is None:
        raise ValueError(f"tactic {t.tactic} of {t.runner} has no tile")
    variant = ""
    if t.sm // 10 in (10, 11):
        schedule = "" if t.epilogue == "auto" else t.epilogue
        variant = schedule_variant(schedule, t.dynamic_cluster is not None)
    elif t.mixed_input:
        variant = t.mainloop  # the mixed-input dispatch instantiates by mainloop schedule
    return ConfigKey(
        dtypes=t.runner,
        tile=tile,
        cluster=t.cluster or (1, 1, 1),
        swap_ab=t.swap_ab,
        fusion=t.fusion,
        variant=variant,
        dynamic=t.dynamic_cluster,
    )


def case_key(
    arch: str,
    dtypes: str,
    tile: Shape,
    cluster: Shape,
    swap_ab: bool,
    fusion: str,
    epilogue: str | None = None,
    dynamic: Shape | None = None,
    mainloop: str | None = None,
    kernel_arch: str | None = None,
) -> ConfigKey:
    """The configuration of a harness case (a matrix's or a results file's), ``dtypes`` as case ids
    spell them. SM100/SM103 cases without an epilogue have the TMA one (codegen); SM90's
    mixed-input ones are told apart by their mainloop, another arch's kernels (SM100's on
    sm103) by :func:`~..generator.kernel_arch_variant`."""
    variant = mainloop or ""
    if arch in ("sm100", "sm103"):
        variant = schedule_variant(epilogue or "tma", dynamic is not None)
    variant += kernel_arch_variant(arch_number(kernel_arch) if kernel_arch else 0)
    return ConfigKey(dtypes, tile, cluster, swap_ab, fusion, variant, dynamic)


TacticId = tuple[int, int]  # (gemm, the autotuner's id)


def format_ids(ids: Iterable[TacticId]) -> str:
    """``G1:#3 G2:#27``: GEMM 1's tactic 3 and GEMM 2's tactic 27 (ids of one runner's list)."""
    return " ".join(f"G{gemm}:#{tactic}" for gemm, tactic in sorted(ids))


def runner_tactics(tactics: Iterable[Tactic], sm: int, runner: str) -> list[Tactic]:
    """One runner's tactics in id order, checked to be numbered as the binding numbers them:
    GEMM 1's ids 0..n1-1, then GEMM 2's n1..n1+n2-1, without gaps (a :class:`ProbeError` says
    where a saved output breaks that)."""
    mine = [t for t in tactics if t.sm == sm and t.runner == runner]
    for position, t in enumerate(mine):
        if t.tactic != position or (position and t.gemm < mine[position - 1].gemm):
            raise ProbeError(
                f"{arch_name(sm)} {runner}: tactic {t.tactic} (GEMM {t.gemm}) at position {position}: the "
                "probe numbers GEMM 1's tactics from 0 and GEMM 2's after them, without gaps"
            )
    return mine


def without_fused_finalize(tactics: Sequence[Tactic]) -> list[Tactic]:
    """One runner's tactics (:func:`runner_tactics`) as a ``MoERunner`` made with
    ``use_fused_finalize=False`` numbers them: its ``mayHaveFinalizeFused()`` is false, so
    ``getTactics(GEMM_2)`` is ``getConfigs(false)``, the very list of GEMM 1, numbered after it."""
    first = [t for t in tactics if t.gemm == 1]
    return first + [replace(t, gemm=2, tactic=len(first) + t.tactic) for t in first]


#: The runners whose GEMM 1 fuses a ClampedRelu2 activation into its epilogue on SM100-SM109
#: (the binding's ``requiresActivationFusionProfile``: bf16 x bf16, MXFP8 x MXFP8).
ACTIVATION_FUSION_INPUTS = (("bf16", "bf16"), ("mxfp8", "mxfp8"))
#: What the binding says of a GEMM 1 tactic without an activation-fusion kernel
NO_ACTIVATION_KERNEL = "ClampedRelu2: no generated activation-fusion epilogue kernel for this tactic"


def fuses_activation(sm: int, runner: str) -> bool:
    """Whether a ClampedRelu2 MoE of ``runner`` on SM ``sm`` runs GEMM 1 with the activation fused."""
    return 100 <= sm < 110 and label_dtypes(runner)[:2] in ACTIVATION_FUSION_INPUTS


def supports_activation_fusion(t: Tactic) -> bool:
    """The binding's ``isActivationFusionProfileSupported``: a TMA WS tactic of SM100-SM109 with
    the TMA epilogue, no swap_ab, CTA 128 x (64 | 128 | 256) x 128 bytes and cluster 1x1x1 or 2x1x1.
    The binding's own rule, kept apart from the generator's set (``configs.ACTIVATION_*``) on
    purpose: drift compares the two, so a release where they part shows as drift."""
    if not (100 <= t.sm < 110 and t.tma_ws and t.epilogue == "tma" and not t.swap_ab):
        return False
    if t.tile_bytes is None:
        return False
    m, n, k = t.tile_bytes
    return m == 128 and k == 128 and n in (64, 128, 256) and t.cluster in ((1, 1, 1), (2, 1, 1))


def with_fused_activation(tactics: Sequence[Tactic]) -> list[Tactic]:
    """One runner's tactics as a ClampedRelu2 MoE runs them (``fc1_activation_type``
    ClampedRelu2 with a clamp limit, no GEMM 1 bias, no LoRA): where the runner fuses it
    (:func:`fuses_activation`), each GEMM 1 tactic selects its tile's ACTIVATION-epilogue kernel,
    or, without one, the binding refuses it (its autotuner skips such ids). Ids do not change;
    GEMM 2 and other runners are as without the activation."""
    out = []
    for t in tactics:
        if t.gemm != 1 or not fuses_activation(t.sm, t.runner) or not t.tma_ws:
            out.append(t)
        elif not supports_activation_fusion(t):
            out.append(replace(t, dispatch="rejected", error=NO_ACTIVATION_KERNEL))
        elif t.dispatch != "accepted":  # the tile the dispatch has no kernel for, fused or not
            out.append(t)
        else:
            inst = None if t.instantiation is None else {**t.instantiation, "fusion": "activation"}
            out.append(replace(t, fusion="activation", instantiation=inst))
    return out


def numbering_digest(sources: FlashInferSources) -> str:
    """SHA-256 over the probe's source and every :data:`NUMBERING_SOURCES` file ``sources`` has:
    what a saved probe output is current for."""
    digest = hashlib.sha256(PROBE_SOURCE.read_bytes())
    for name in NUMBERING_SOURCES:
        path = (sources.root / name).resolve()
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(absent)")
    return digest.hexdigest()
