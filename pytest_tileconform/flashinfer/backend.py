"""The FlashInfer CUTLASS MoE grouped-GEMM backend: build the harnesses, run each case, check D.

Cases are compiled together, up to ``group`` instantiations per translation unit (as FlashInfer
does; the front end is shared). On hardware, a worker runs its cases in one long-lived runner
process that loads each unit once (:mod:`.runner`); a kernel that traps or leaves a sticky CUDA
error ends only that runner (the next case starts a new one), and a timeout bounds each case.
On the virtual device each case runs in its own process of the unit's virtual executable.
A shared unit that fails to compile is rebuilt case by case, so a compile error is the verdict
of the case that has it.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..build import nvcc_pipeline
from ..build.cache import (
    BuildCache,
    BuildResult,
    BuildSpec,
    Roots,
    available_cores,
    available_memory,
    parallel_jobs,
    portable,
)
from ..core.devices import Gpu, current_gpu
from ..core.gctime import COLLECTOR_TIME, freeze_survivors
from ..matrix.cases import Case
from ..verdict import NotJudgeable, Stage, Verdict
from ..virtual.build import build_runtime
from ..virtual.profiles import BUILTIN, ArchProfile, builtin
from ..virtual.run import run_virtual, verdict_of
from . import NAME
from .codegen import HARNESS_DIR, KernelConfig, UnsupportedConfig, generate_translation_unit
from .compat import harness_error, incompatibility
from .nvcc_flags import nvcc_command
from .runner import HarnessRunner, build_runner
from .sources import (
    FlashInferSources,
    FlashInferSourcesError,
    build_salt,
    find_cublas_include,
    find_cuda_home,
    find_sources,
)

T = TypeVar("T")
#: Peak RAM of one compile, measured: SM90 3.7-4.6 GB here with nvcc alone; SM120 NVFP4 about
#: 6.6 GB. Through :mod:`..nvcc_pipeline` cudafe++ (1.9 GB) runs beside cicc: for SM90 while
#: cicc nears its peak (bf16 128x128x64: 5.7 GB, cicc 3.76 + cudafe++ 1.90 at once, against
#: 3.8 GB for nvcc alone), so up to about 6.5 GB; for SM120 cicc peaks after cudafe++ has ended
#: (NVFP4 128x128x128: 6.0 GB, cicc 5.9), which the default still covers. SM90's figure is
#: where the line through its measured shared units starts (below).
RAM_PER_COMPILE = {90: 7_000_000_000}
RAM_PER_COMPILE_DEFAULT = 7_000_000_000
#: Extra peak RAM per further instantiation in a shared unit of one dtype (cicc's peak plus
#: cudafe++'s, which runs beside it). SM90, measured on the H200 host
#: (benchmarks/compile_steps.py): bf16 units of 8, 16, 36 in matrix order 7.7, 10.5, 12.9 GB;
#: fp8 16 and 36 10.5 and 12.9 GB; the line from one case's 7 GB with 0.25 GB per further one
#: covers them all. SM120 NVFP4 grows faster (the CPU machine: one case 5.97 GB in cicc, 8
#: cases 9.96 GB, 0.57 GB per further one), so other archs get 0.6 GB.
#: Units of mixed dtypes need more (6 SM90 cases of mixed dtypes: 8.6 GB with nvcc alone on
#: the CPU machine, 1 GB per further one), so a unit never mixes them (:func:`plan_groups`).
RAM_PER_EXTRA_INSTANTIATION = {90: 250_000_000}
RAM_PER_EXTRA_INSTANTIATION_DEFAULT = 600_000_000
#: Most instantiations per translation unit: the largest unit measured (FlashInfer's generator
#: writes 8 per file; what a run uses is :func:`unit_size`'s choice up to this).
DEFAULT_GROUP = 36


@dataclass(frozen=True)
class UnitCost:
    """What a shared unit of g instantiations costs relative to one case alone: its critical
    path (cicc, ptxas, host compile; cudafe++ and TensorRT-LLM's host files run beside them)
    is 1 + ``path_per_extra`` x (g - 1) times one case's, its CPU time 1 + ``cpu_per_extra`` x
    (g - 1) times one case's; ``cpu_per_path`` is one case's CPU seconds per second of its
    critical path, the cores a compile keeps busy. The front end (cudafe++, cicc's parse, the
    host compile) is what a unit shares."""

    path_per_extra: float
    cpu_per_extra: float
    cpu_per_path: float

    def path(self, size: int) -> float:
        return 1 + self.path_per_extra * (size - 1)

    def cpu(self, size: int) -> float:
        return self.cpu_per_path * (1 + self.cpu_per_extra * (size - 1))


#: Measured with benchmarks/compile_steps.py, cases in matrix order. SM90 bf16 and fp8 on the
#: H200 host: critical path 55 s for one, 98 s for 8, 157 s for 16, 243 s for 36; CPU 90 CPU-s
#: for one, 136-148 for 8, 197 for 16, 289-297 for 36.
UNIT_COST = {90: UnitCost(path_per_extra=0.11, cpu_per_extra=0.07, cpu_per_path=1.64)}
#: Other archs: SM120 NVFP4 on the CPU machine, critical path 92 s for one, 174 s for 8; CPU
#: 116 CPU-s for one, 213.5 for 8.
UNIT_COST_DEFAULT = UnitCost(path_per_extra=0.13, cpu_per_extra=0.12, cpu_per_path=1.26)
DEVICES = ("auto", "hardware", "virtual", "compile")
#: The harness's stages that are verdicts on the case. "launcher" is a TensorRT-LLM check in
#: the launcher itself (before CUTLASS): it refuses the arguments, as can_implement does.
HARNESS_STAGES = {
    "can_implement": Stage.CAN_IMPLEMENT,
    "launcher": Stage.CAN_IMPLEMENT,
    "initialize": Stage.INITIALIZE,
    "launch": Stage.LAUNCH,
    "run": Stage.RUN,
}
VIRTUAL_SUFFIX = "-virtual"
#: Compiles run nvcc's passes side by side (:mod:`..nvcc_pipeline`), by this interpreter and this
#: copy of the module (``-I``: only the standard library, whatever the environment says).
PIPELINE_SCRIPT = Path(nvcc_pipeline.__file__).resolve()
PYTHON = sys.executable or shutil.which("python3") or "/usr/bin/python3"


@dataclass(frozen=True)
class Settings:
    device: str  # auto | hardware | compile | virtual | virtual:<arch>
    cache_dir: Path
    sources: Path | None
    jobs: int | None
    group: int | None  # most instantiations per translation unit (None: DEFAULT_GROUP)
    timeout: float
    seed: int
    timing_iters: int  # hardware only: timed launcher calls after the checked run
    keep_runs: bool
    worker_count: int
    worker_index: int


def kernel_config(case: Case) -> KernelConfig:
    return KernelConfig(
        arch=case.sm,
        act=case.act,
        weight=case.weight,
        out=case.out,
        tile=case.tile,
        cluster=case.cluster,
        swap_ab=case.swap_ab,
        fusion=case.fusion,
    )


def compile_command(hardware_command: list[str]) -> list[str]:
    """The compile of a unit to objects (add ``-odir DIR``) that :func:`build_script` runs,
    from :func:`codegen.nvcc_command` (``... --cudart=static SRC COMMON... -o OUT``).
    ``--no-compress`` keeps the cubins readable for the virtual device's resource table and
    changes no code."""
    cudart = hardware_command.index("--cudart=static")
    sources = hardware_command[cudart + 1 : hardware_command.index("-o")]
    return [hardware_command[0], *hardware_command[1:cudart], "--no-compress", "-c", *sources]


def build_script(hardware_command: list[str], runtime: Path) -> tuple[str, ...]:
    """One build, two programs: compile the unit once to objects, then link the hardware
    harness (a shared library with static cudart, which the runner loads: :mod:`.runner`) and
    the virtual one (an executable on the project's runtime) from the same objects.

    ``hardware_command`` is :func:`codegen.nvcc_command`; the compile (:func:`compile_command`)
    runs through :mod:`..nvcc_pipeline`: nvcc's passes side by side, nvcc's objects but for the
    module id in the names of internal-linkage symbols.
    """
    nvcc = hardware_command[0]
    objdir = "{out}.o.d"
    q = shlex.quote
    pipeline = [PYTHON, "-I", str(PIPELINE_SCRIPT)]
    compile_cmd = shlex.join([*pipeline, *compile_command(hardware_command)])
    compile_cmd = compile_cmd.replace(q("{src}"), "{src}")
    return (
        "sh",
        "-c",
        f"set -e; mkdir -p {objdir}; {compile_cmd} -odir {objdir}; "
        f"{q(nvcc)} --cudart=static -shared {objdir}/*.o -o {{out}}; "
        f"{q(nvcc)} --cudart=none {objdir}/*.o {q(str(runtime))} -o {{out}}{VIRTUAL_SUFFIX}; "
        f"rm -rf {objdir}",
    )


def compile_ram(sm: int, instantiations: int) -> int:
    """Peak RAM of compiling a unit of ``instantiations`` of one dtype for SM ``sm``."""
    one = RAM_PER_COMPILE.get(sm, RAM_PER_COMPILE_DEFAULT)
    return one + RAM_PER_EXTRA_INSTANTIATION.get(sm, RAM_PER_EXTRA_INSTANTIATION_DEFAULT) * (
        instantiations - 1
    )


def dtypes(case: Case) -> tuple[str, str, str]:
    """A case's activation, weight and output dtypes: what the cases of one unit share."""
    return case.act, case.weight, case.out


def plan_groups(
    items: Sequence[T], most: int, family: Callable[[T], Hashable] | None = None
) -> list[list[T]]:
    """Split ``items`` (one arch) into as few groups of at most ``most`` as possible, as even as
    possible (the slowest group sets the wall time). :func:`unit_size` chooses ``most``.

    Without ``family`` the groups are contiguous runs of ``items``. With it, a group holds
    items of one family (the dtypes: they share less of the front end and need more memory
    together), in their order. Matrices interleave families (an fp8 suite with two output
    types alternates them every few cases), so the families are gathered first."""
    families: dict[Hashable, list[T]] = {}
    for item in items:
        families.setdefault(None if family is None else family(item), []).append(item)
    groups: list[list[T]] = []
    for members in families.values():
        parts = -(-len(members) // max(1, most))
        start = 0
        for i in range(parts):
            size = len(members) // parts + (1 if i < len(members) % parts else 0)
            groups.append(members[start : start + size])
            start += size
    return groups


def unit_size(
    families: Sequence[int], most: int, jobs_for: Callable[[int], int], cores: int, cost: UnitCost
) -> int:
    """The unit size (1 to ``most``), with the parallel compiles ``jobs_for(size)`` allows for
    it, that builds soonest the cases of ``families`` (how many cases each dtype has: a unit
    holds one dtype, :func:`plan_groups`). The build takes whichever is longer: its rounds of
    parallel compiles, each as long as one unit's critical path, or all units' CPU time spread
    over ``cores`` (both from the arch's ``cost``, in one case's critical paths). Larger units
    save compiler time but need more RAM each, so fewer of them run at once; ties go to the
    larger unit."""
    best: tuple[float, int] | None = None
    for most_per_unit in range(1, max(1, most) + 1):
        parts = [-(-cases // most_per_unit) for cases in families]  # as plan_groups splits them
        sizes = [-(-cases // n) for cases, n in zip(families, parts, strict=True)]
        size = max(sizes)
        jobs = max(1, jobs_for(size))
        rounds = -(-sum(parts) // jobs)
        path = rounds * cost.path(size)
        cpu = sum(n * cost.cpu(s) for n, s in zip(parts, sizes, strict=True))
        makespan = max(path, cpu / max(1, cores))
        if best is None or makespan <= best[0] + 1e-9:
            best = (makespan, size)
    assert best is not None
    return best[1]


MACS_PER_THREAD = 16_000_000
"""Multiply-adds of a case's reference product per torch thread. Measured on the 16-core H200
host (``benchmarks/check_threads.py``): the sm90 matrix's problem (74 M) checks in 2.4 ms on 4
threads and 2.05 ms on 16, but in a real run 16 threads stalled one check in six for 32-108 ms:
a thread that another process (the runner, pytest) preempts holds up the rest at the next
barrier; with 4 the check's p90 fell from 40.6 to 5.7 ms. From 1 G multiply-adds up, 16 threads
check twice as fast as 4 (19.5 against 38 ms; 727 against 1,408 ms at 120 G), and a stall is
small beside the work."""


def case_threads(case: Case, cores: int, workers: int) -> int:
    """Threads for torch in a case's inputs and reference check: one per
    :data:`MACS_PER_THREAD` of its product, at most the worker's share of the ``cores`` that
    ``workers`` processes share."""
    problem = case.problem
    macs = sum(problem.rows_per_expert) * problem.n * problem.k
    return max(1, min(macs // MACS_PER_THREAD, cores // max(1, workers)))


class FlashInferBackend:
    name = NAME

    def __init__(self, settings: Settings, progress: Callable[[str], None]) -> None:
        self.settings = settings
        self.cache = BuildCache(settings.cache_dir, progress)
        self._builds: dict[Case, BuildResult | Verdict] = {}
        self._sources: FlashInferSources | None = None
        self._toolchain: tuple[Path, str, Path] | None = None
        self._commands: dict[int, tuple[tuple[str, ...], Roots]] = {}
        self._gpu: Gpu | bool | None = False  # False: not looked up yet

    # -- what is here -------------------------------------------------------------------
    @property
    def sources(self) -> FlashInferSources:
        if self._sources is None:
            self._sources = find_sources(self.settings.sources)
        return self._sources

    @property
    def toolchain(self) -> tuple[Path, str, Path]:
        """CUDA home, the cache salt (nvcc, FlashInfer version and sources) and the virtual runtime."""
        if self._toolchain is None:
            home = find_cuda_home()
            try:
                salt = build_salt(self.sources, home, self.settings.cache_dir)
            except FlashInferSourcesError as exc:  # nvcc unusable: nothing here can be judged
                raise NotJudgeable(str(exc)) from None
            self._toolchain = (home, salt, build_runtime(self.settings.cache_dir, home))
        return self._toolchain

    @property
    def gpu(self) -> Gpu | None:
        if self._gpu is False:
            self._gpu = current_gpu() if self.settings.device in ("auto", "hardware") else None
        return self._gpu  # type: ignore[return-value]

    @functools.cached_property
    def _hardware_runner(self) -> HarnessRunner:
        return HarnessRunner(build_runner(self.settings.cache_dir))

    def _profile(self, case: Case) -> ArchProfile:
        _, _, arch = self.settings.device.partition(":")
        try:
            return builtin(arch or case.arch)
        except KeyError:
            raise NotJudgeable(f"no virtual profile for {arch or case.arch}") from None

    @functools.cached_property
    def _incompatibility(self) -> str | None:
        """Why these sources cannot be instantiated by the harness (compat.py), None if they can."""
        return incompatibility(self.sources.root)

    def _mode(self, case: Case) -> str:
        """How this case is judged here: ``hardware``, ``virtual`` or ``compile``.

        ``auto`` takes the GPU when it is the case's arch, else the case's virtual profile;
        a case neither can judge raises NotJudgeable (it is skipped, saying what was found).
        """
        if (reason := self._incompatibility) is not None:
            raise NotJudgeable(
                f"FlashInfer {self.sources.version} cannot be judged by this harness: {reason}"
            )
        device = self.settings.device
        if device == "compile":
            return "compile"
        if device.startswith("virtual"):
            self._profile(case)
            return "virtual"
        gpu = self.gpu
        if gpu is not None and gpu.sm == case.sm:
            return "hardware"
        found = f"found {gpu.arch}: {gpu.describe()}" if gpu else "found no GPU"
        if device == "auto" and case.arch in BUILTIN:
            return "virtual"
        raise NotJudgeable(
            f"{case.arch} is not present ({found}); --tile-device virtual judges it on a "
            "virtual device, --tile-device compile only compiles it"
        )

    # -- building ----------------------------------------------------------------------
    def _command(self, config: KernelConfig) -> tuple[tuple[str, ...], Roots]:
        """The build script for ``config``'s arch (the same for every unit of an arch), with
        the install roots as placeholders: the key must not depend on where things are
        installed; their contents are in the salt (nvcc, FlashInfer's sources fingerprint) or in
        the unit itself (harness fingerprint)."""
        if config.arch not in self._commands:
            home, _, runtime = self.toolchain
            command = nvcc_command(config, self.sources, Path("{src}"), Path("{out}"), home)
            roots = {
                "flashinfer": self.sources.root,
                "harness": HARNESS_DIR,
                "cuda": home,
                "cublas": find_cublas_include(home),
                "cache": self.settings.cache_dir,
                "python": Path(PYTHON),
                "tileconform": PIPELINE_SCRIPT.parent,
            }
            self._commands[config.arch] = portable(build_script(command, runtime), roots)
        return self._commands[config.arch]

    def _spec(self, cases: Sequence[Case]) -> BuildSpec:
        """The build of one translation unit holding ``cases`` (one arch)."""
        configs = list(dict.fromkeys(kernel_config(case) for case in cases))
        command, roots = self._command(configs[0])
        label = cases[0].id if len(cases) == 1 else f"{len(configs)} instantiations: {cases[0].id} ..."
        return BuildSpec(
            source=generate_translation_unit(configs, self.sources.version),
            command=command,
            salt=self.toolchain[1],
            ram_bytes=compile_ram(cases[0].sm, len(configs)),
            label=label,
            roots=roots,
        )

    def prepare(self, cases: Sequence[Case]) -> None:
        """Build every judgeable case of this worker before the first one runs, in parallel.

        Cases without a cache entry are compiled in shared units (:func:`plan_groups`); each
        case's own entry then points at its unit, so later runs find it whatever the grouping.
        """
        specs: dict[Case, BuildSpec] = {}
        for case in cases:
            try:
                if self._mode(case) == "hardware":
                    self._hardware_runner.start()
                specs[case] = self._spec([case])
            except NotJudgeable:
                continue
            except UnsupportedConfig as exc:
                self._builds[case] = self._unsupported(exc)
        if not specs:
            return
        workers = max(1, self.settings.worker_count)
        missing = [case for case, spec in specs.items() if self.cache.lookup(spec) is None]
        most = self.settings.group or DEFAULT_GROUP
        if len(missing) > 1 and most > 1:
            self._build_shared(missing, specs, most)
        ordered = list(specs.values())
        # xdist workers share one build queue through the cache's locks; starting at
        # different places lets each claim its own part first
        start = self.settings.worker_index * len(ordered) // workers
        built = self.cache.build(
            ordered[start:] + ordered[:start], self._jobs(ordered)[1], self._claim(ordered)
        )
        for case, spec in specs.items():
            self._builds[case] = built[spec.key]

    def _jobs(self, specs: Sequence[BuildSpec]) -> tuple[int, int]:
        """Parallel compiles of ``specs`` for the host and for this process: --tile-build-jobs
        (a total for the host, shared by the xdist workers) or what cores and RAM allow."""
        workers = max(1, self.settings.worker_count)
        host = self.settings.jobs or parallel_jobs(specs)
        return host, max(1, -(-host // workers))

    def _claim(self, specs: Sequence[BuildSpec]) -> int:
        """How many of ``specs`` this process takes on at once: its xdist worker's part, so the
        workers build side by side and each keeps its jobs busy without waiting for rounds."""
        return max(1, -(-len(specs) // max(1, self.settings.worker_count)))

    def _build_shared(self, missing: list[Case], specs: dict[Case, BuildSpec], most: int) -> None:
        """Compile ``missing`` in shared units and point each case's entry at its unit.

        A unit that fails to compile is planned again, its cases in units of at most half its
        size, until the units are of 2 or 3; the cases of those that still fail are left to be
        built one by one, where a failure is the case's verdict. One bad case among 36 then
        costs a few rounds of smaller units, not 36 compiles of one case each (a unit of 36
        costs 3.3x the CPU of one case alone, :data:`UNIT_COST`). A killed compile is
        not planned again: its cases are built alone, which needs the least memory."""
        pending = self._plan_units(missing, most)
        while pending:
            start = self.settings.worker_index * len(pending) // max(1, self.settings.worker_count)
            pending = pending[start:] + pending[:start]
            unit_specs = [spec for _, spec in pending]
            built = self.cache.build(unit_specs, self._jobs(unit_specs)[1], self._claim(unit_specs))
            failed: list[list[Case]] = []
            for group, spec in pending:
                unit = built[spec.key]
                if unit.ok:
                    for case in group:
                        self.cache.link(specs[case], unit)
                elif not unit.killed and len(group) >= 4:
                    failed.append(group)
            pending = [unit for group in failed for unit in self._plan_units(group, len(group) // 2)]

    def _plan_units(self, cases: list[Case], most: int) -> list[tuple[list[Case], BuildSpec]]:
        """``cases`` in units of at most ``most`` (:func:`unit_size`, :func:`plan_groups`), each
        with its build spec."""
        by_arch: dict[int, list[Case]] = {}
        for case in cases:
            by_arch.setdefault(case.sm, []).append(case)
        cores, memory = available_cores(), available_memory()  # one look at the host per plan
        units: list[tuple[list[Case], BuildSpec]] = []
        for sm, arch_cases in by_arch.items():

            def jobs_for(size: int, sm: int = sm) -> int:
                return self.settings.jobs or parallel_jobs(
                    [], cores=cores, memory=memory, per_job=compile_ram(sm, size)
                )

            families = Counter(dtypes(c) for c in arch_cases)
            cost = UNIT_COST.get(sm, UNIT_COST_DEFAULT)
            size = unit_size(list(families.values()), most, jobs_for, cores, cost)
            groups = plan_groups(arch_cases, size, family=dtypes)
            units += [(group, self._spec(group)) for group in groups]
        return units

    def _unsupported(self, exc: UnsupportedConfig) -> Verdict:
        return Verdict(
            Stage.COMPILE,
            Stage.COMPILE,
            source=f"codegen (flashinfer {self.sources.version})",
            status="not instantiable",
            detail=str(exc),
        )

    def _build(self, case: Case) -> BuildResult | Verdict:
        if case not in self._builds:
            try:
                spec = self._spec([case])
            except UnsupportedConfig as exc:
                return self._unsupported(exc)
            self._builds[case] = self.cache.build([spec], self._jobs([spec])[1])[spec.key]
        return self._builds[case]

    # -- judging -----------------------------------------------------------------------
    def judge(self, case: Case) -> Verdict:
        mode = self._mode(case)
        build = self._build(case)
        if isinstance(build, Verdict):
            return build
        base = {"flashinfer": self.sources.version, "build": str(build.path)}
        if build.killed:  # not the source's doing: no verdict, and the test errs rather than skips
            raise RuntimeError(f"{case.id} has no build: {build.first_error}")
        if not build.ok and harness_error(build.first_error):
            # our harness, not the instantiation, failed to compile: no verdict on the case
            raise NotJudgeable(
                f"the harness does not compile against FlashInfer {self.sources.version}: {build.first_error}"
            )
        if not build.ok:
            return Verdict(
                Stage.COMPILE,
                Stage.COMPILE,
                source=f"nvcc (flashinfer {self.sources.version})",
                status="compile error",
                detail=build.first_error,
                extra=base,
            )
        if mode == "compile":
            return Verdict(None, Stage.COMPILE, source="compile only", extra=base)
        if mode == "virtual":
            return self._run_virtual(case, build, base)
        return self._run(case, build, base)

    def _settle_case(self, case: Case) -> None:
        """Before each case this process runs:

        - torch gets :func:`case_threads` threads for the case's inputs and reference check;
        - everything alive now (torch, pytest's items, the reports of the cases before) is moved
          out of the garbage collector's reach (``gc.freeze``), after a young collection that
          frees the previous case's garbage cycles rather than freezing them. A full collection
          over all of it takes tens of milliseconds and lands on whichever case allocates at
          that moment; frozen only once per process, the objects each case adds stay in its
          reach (``benchmarks/reference_check_gc.py``: one full collection in 360 cases frozen
          once, none frozen before each). The collector's time per case is in ``seconds.gc``.
        """
        import torch  # imported by then

        COLLECTOR_TIME.install()
        torch.set_num_threads(case_threads(case, self._cores, self.settings.worker_count))
        freeze_survivors()

    @functools.cached_property
    def _cores(self) -> int:
        """The cores this process may use, for torch's threads (looked up once)."""
        return available_cores()

    def _run_virtual(self, case: Case, build: BuildResult, base: dict[str, Any]) -> Verdict:
        from .reference import make_inputs, write_inputs

        self._settle_case(case)
        profile = self._profile(case)
        with tempfile.TemporaryDirectory(prefix="tileconform-virtual-") as tmp:
            run_dir = Path(tmp)
            write_inputs(make_inputs(case, self.settings.seed), run_dir)
            executable = build.path / (build.artifact.name + VIRTUAL_SUFFIX)
            args = [str(run_dir), kernel_config(case).name]
            run = run_virtual(executable, args, run_dir, profile, self.settings.timeout)
            verdict = verdict_of(run, f"virtual ({profile.arch} profile)")
        verdict.extra.update(base)
        return verdict

    def _run(self, case: Case, build: BuildResult, base: dict[str, Any]) -> Verdict:
        # torch is imported here, not at plugin load: most pytest runs never judge on hardware
        from .reference import make_inputs, read_output, reference_output, write_inputs
        from .tolerance import compare, policy_for

        self._settle_case(case)
        gpu = self.gpu
        assert gpu is not None  # _mode made sure
        source = f"hardware ({gpu.describe()})"
        run_dir = Path(tempfile.mkdtemp(prefix="tileconform-run-"))
        started = time.perf_counter()
        collected = COLLECTOR_TIME.seconds
        try:
            inputs = make_inputs(case, self.settings.seed)
            write_inputs(inputs, run_dir, extra_problem={"timing_iters": self.settings.timing_iters})
            if os.environ.get("TILECONFORM_INJECT_FAULT") == case.id:  # test-only switch
                with (run_dir / "problem.txt").open("a") as handle:
                    handle.write("inject_fault trap\n")
            inputs_done = time.perf_counter()
            report, failure = self._execute(build.artifact, run_dir, kernel_config(case).name)
            harness_done = time.perf_counter()
            # where a case's time goes: the targets of issue 7 are about the part that is not the kernel
            seconds = {
                "inputs": round(inputs_done - started, 4),
                "harness": round(harness_done - inputs_done, 4),
            }
            extra: dict[str, Any] = {**base, "gpu": f"{gpu.index} ({gpu.uuid})", "seconds": seconds}
            extra.update({k: report[k] for k in ("kernel_ms", "device", "cuda_error") if k in report})
            common: dict[str, Any] = {
                "judged_through": Stage.NUMERICS,
                "source": source,
                "smem_requested": report.get("smem_requested"),
                "smem_limit": report.get("smem_limit"),
                "workspace_bytes": report.get("workspace_bytes"),
            }
            if failure is not None:
                return Verdict(Stage.RUN, status=failure, detail=failure, extra=extra, **common)
            stage = report.get("stage", "run")
            if stage == "setup":  # the harness never reached the launcher: our fault, not a verdict
                raise RuntimeError(f"harness setup failed: {report.get('status')}: {report.get('message')}")
            if stage != "pass":
                return Verdict(
                    HARNESS_STAGES.get(stage, Stage.RUN),
                    status=report.get("status", ""),
                    detail=report.get("message", ""),
                    extra=extra,
                    **common,
                )
            usage = resource.getrusage(resource.RUSAGE_SELF)
            actual = read_output(run_dir, case, inputs)
            read_done = time.perf_counter()
            expected = reference_output(inputs, case)
            reference_done = time.perf_counter()
            numerics = compare(actual, expected, policy_for(case))
            check_done = time.perf_counter()
            after = resource.getrusage(resource.RUSAGE_SELF)
            seconds["check"] = round(check_done - harness_done, 4)
            # the check's parts, and what the operating system did to the process meanwhile: how
            # slow checks on an H200 host were traced to preempted torch threads (case_threads)
            seconds["check_read"] = round(read_done - harness_done, 4)
            seconds["check_reference"] = round(reference_done - read_done, 4)
            seconds["check_compare"] = round(check_done - reference_done, 4)
            seconds["gc"] = round(COLLECTOR_TIME.seconds - collected, 4)  # within the parts above
            extra["check_usage"] = {
                "minor_faults": after.ru_minflt - usage.ru_minflt,
                "major_faults": after.ru_majflt - usage.ru_majflt,
                "involuntary_switches": after.ru_nivcsw - usage.ru_nivcsw,
            }
            extra["numerics"] = numerics.summary()
            if not numerics.ok:
                return Verdict(
                    Stage.NUMERICS, status="mismatch", detail=numerics.summary(), extra=extra, **common
                )
            return Verdict(None, extra=extra, **common)
        finally:
            if not self.settings.keep_runs:
                shutil.rmtree(run_dir, ignore_errors=True)

    def _execute(self, unit: Path, run_dir: Path, name: str) -> tuple[dict[str, Any], str | None]:
        """Run case ``name`` of the harness ``unit`` in this worker's runner; return its
        verdict.json and, if the runner itself failed, why."""
        failure = self._hardware_runner.run(unit, run_dir, name, self.settings.timeout).failure
        try:
            report = json.loads((run_dir / "verdict.json").read_text())
        except (OSError, ValueError):
            report = {}
        if failure is not None and report.get("stage") not in (None, "run", "pass"):
            failure = None  # the harness reached its own verdict before the process failed
        return report, failure
