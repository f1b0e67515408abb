"""The FlashInfer CUTLASS MoE grouped-GEMM backend: how each case is judged here, its build, and
its verdict.

Cases are compiled together, up to ``group`` instantiations per translation unit (as FlashInfer
does; the front end is shared): :mod:`.planner` chooses the units, :mod:`.buildscript` says how
one is built. On hardware, a worker runs its cases in one long-lived runner process that loads
each unit once (:mod:`.runner`, :mod:`.hardware`); a kernel that traps or leaves a sticky CUDA
error ends only that runner (the next case starts a new one), and a timeout bounds each case.
On the virtual device each case runs in its own process of the unit's virtual executable.
A shared unit that fails to compile is planned again in smaller units (:mod:`.unitbuild`), so a
compile error is the verdict of the case that has it.
"""

from __future__ import annotations

import functools
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..compile.cache import BuildResult, BuildSpec, Roots, parallel_jobs
from ..compile.caches import open_cache
from ..compile.hostbuild import HostBuildError
from ..compile.inputs import BuildInput
from ..core.devices import Gpu, current_gpu
from ..verdict import Device, NotJudgeable, Stage, UnusableEnvironment, Verdict
from ..virtual.build import runtime_in_background, runtime_path
from ..virtual.profiles import BUILTIN, ArchProfile, ProfileError, builtin
from ..virtual.run import run_virtual, verdict_of
from . import NAME, hardware
from .axes import MoeCase
from .buildscript import VIRTUAL_SUFFIX, build_inputs, kernel_config, portable_build
from .codegen import generate_translation_unit, harness_apart
from .compat import harness_error, incompatibility
from .configs import LAUNCHER_ARCHS, KernelConfig, UnsupportedConfig, instantiated_dtypes, sequence_partner
from .environment import (
    NEEDS_NVCC,
    PREFIX,
    check_device,
    compile_failed_message,
    usable_host_compiler,
    usable_paths,
    usable_sources,
    usable_toolkit,
)
from .features import family, release_features
from .harness_report import HarnessReport
from .hostmemory import virtual_refusal
from .planner import DEFAULT_GROUP, compile_ram, unit_seconds
from .probe import ReleaseProbe, front_end
from .runner import HarnessRunner, build_runner
from .sanitizer import SanitizerRun, find_sanitizer, sanitize
from .settings import Settings
from .settling import CaseSettling
from .sources import SOURCE_ROOTS, FlashInferSources, FlashInferSourcesError, build_salt
from .unitbuild import UnitBuilder

if TYPE_CHECKING:
    from .numerics.prepared import WorkerInputs

__all__ = ["NAME", "FlashInferBackend", "Settings", "kernel_config"]


def one_per_build(specs: dict[MoeCase, BuildSpec]) -> list[MoeCase]:
    """The first case of each distinct build among ``specs``, in their order."""
    first: dict[str, MoeCase] = {}
    for case, spec in specs.items():
        first.setdefault(spec.key, case)
    return list(first.values())


def _nothing_before_run(case: MoeCase, run_dir: Path) -> None:
    """No plugin looks at a case's inputs before its harness runs."""


class FlashInferBackend:
    name = NAME
    archs = LAUNCHER_ARCHS  # a matrix of another arch is refused when it loads

    def dtypes_on(self, arch: str) -> tuple[tuple[str, str, str], ...]:
        """The dtypes of the launcher's kernels on ``arch``: a matrix asking another is refused
        when it loads (:class:`..backend.DTypeBackend`)."""
        from ..archs import arch_number

        return instantiated_dtypes(arch_number(arch))

    def __init__(
        self,
        settings: Settings,
        progress: Callable[[str], None],
        before_run: hardware.BeforeRun = _nothing_before_run,
        refusal: str | None = None,
    ) -> None:
        """``progress`` shows build progress to the user; ``before_run(case, run_dir)`` is
        called once a case's inputs are in its run directory, before its harness runs (the
        plugin passes its ``pytest_tileconform_before_run`` hook); ``refusal``: why no case of
        this backend can be judged in this run (a ``--tile-flashinfer`` release its harness
        cannot instantiate), said when it has cases to judge."""
        self.settings = settings
        self._refusal = refusal
        self.cache = open_cache(
            settings.cache_dir, progress, settings.cache_remote, settings.build_on, settings.jobs
        )
        self._units = UnitBuilder(self.cache, settings, lambda cases: self._spec(cases), self._other_mode)
        self._before_run = before_run
        self._settling = CaseSettling(settings.worker_count)
        self._builds: dict[MoeCase, BuildResult | Verdict | NotJudgeable] = {}
        self._sources: FlashInferSources | None = None
        self._toolchain: tuple[Path, str, Path] | None = None
        self._runtime_digest = ""  # the virtual runtime's checked sum, once it is built or checked
        self._runtime_build: Future[str] | None = None  # its build, begun beside what comes first
        self._input_list: tuple[str, tuple[BuildInput, ...]] | None = None  # by that sum
        self._commands: dict[tuple[int, bool], tuple[tuple[str, ...], Roots]] = {}
        self._gpu: Gpu | bool | None = False  # False: not looked up yet

    # -- what is here -------------------------------------------------------------------
    def places(self) -> dict[str, Path]:
        """FlashInfer's sources as ``<flashinfer>``: compile errors quote its headers, from
        wherever this host keeps them (site-packages, a carried copy, a release folder)."""
        return {} if self._sources is None else {"<flashinfer>": self._sources.root}

    @property
    def sources(self) -> FlashInferSources:
        """FlashInfer's sources; without them nothing can be judged (UnusableEnvironment)."""
        if self._sources is None:
            self._sources = usable_sources(self.settings)
        return self._sources

    @property
    def toolchain(self) -> tuple[Path, str, Path]:
        """CUDA home, the cache salt (nvcc, FlashInfer version and sources) and where the
        virtual runtime lies (built before the first compile, :meth:`_build_runtime`); without
        them nothing can be judged (UnusableEnvironment)."""
        if self._toolchain is None:
            usable_host_compiler()
            home, _ = usable_toolkit()
            usable_paths(
                {
                    "the build cache": (self.settings.cache_dir, "point --tile-cache-dir elsewhere"),
                    "FlashInfer's sources": (self.sources.root, "copy them to a folder without these"),
                    "the CUDA toolkit": (home, "link it from a folder without them, CUDA_HOME there"),
                }
            )
            try:
                runtime = runtime_path(self.settings.cache_dir, home)
            except OSError as exc:  # the runtime is keyed by the toolkit's headers
                raise UnusableEnvironment(
                    f"{PREFIX}the CUDA toolkit at {home} lacks {exc.filename} ({exc.strerror}): set "
                    f"CUDA_HOME to a complete toolkit; {NEEDS_NVCC}"
                ) from None
            self._start_runtime(home)  # beside the sources' fingerprint, the salt's part
            try:
                salt = build_salt(self.sources, home, self.settings.cache_dir)
            except FlashInferSourcesError as exc:
                raise UnusableEnvironment(f"{PREFIX}{exc}") from None
            self._toolchain = (home, salt, runtime)
        return self._toolchain

    def _start_runtime(self, home: Path) -> Future[str]:
        """The virtual runtime's build, begun once (:func:`..virtual.build.runtime_in_background`)."""
        if self._runtime_build is None:
            self._runtime_build = runtime_in_background(self.settings.cache_dir, home)
        return self._runtime_build

    def _build_runtime(self) -> None:
        """The virtual runtime every build links (its path is in their commands), and the sum
        its checked entry lists, which the builds must read (:func:`.buildscript.build_inputs`)."""
        if self._runtime_digest:
            return
        try:
            self._runtime_digest = self._start_runtime(self.toolchain[0]).result()
        except HostBuildError as exc:
            first = str(exc).splitlines()[0]
            raise UnusableEnvironment(f"{PREFIX}the virtual runtime does not build here: {first}") from None

    def check_environment(self, cases: Sequence[MoeCase]) -> None:
        """Whether this host can judge ``cases`` at all, before any is built: the device can
        load their code, FlashInfer's sources, the CUDA toolkit and the C++ compiler are there
        (:mod:`.environment`). No compile, no CUDA. When every case is skipped here (their
        arch is absent from ``--tile-device hardware``), nothing is compiled: none of it is
        needed."""
        if self._refusal is not None:
            raise UnusableEnvironment(self._refusal)
        check_device(self.settings.device, [case.arch for case in cases])
        for arch, sm in {case.arch: case.sm for case in cases}.items():
            try:
                self.device_for(arch, sm)
            except NotJudgeable:
                continue
            self.sources  # noqa: B018 (each refused with one line)
            self.toolchain  # noqa: B018
            return

    @property
    def gpu(self) -> Gpu | None:
        if self._gpu is False:
            self._gpu = current_gpu() if self.settings.device.kind in ("auto", "hardware") else None
        return self._gpu  # type: ignore[return-value]

    @functools.cached_property
    def _hardware_runner(self) -> HarnessRunner:
        return HarnessRunner(functools.partial(build_runner, self.settings.cache_dir))

    def _profile(self, case: MoeCase) -> ArchProfile:
        return self._profile_of(case.arch)

    def _profile_of(self, arch: str) -> ArchProfile:
        """The virtual profile cases of ``arch`` run on: their own arch's (``virtual:<arch>``
        names only that one, :func:`.environment.check_device`)."""
        try:
            return builtin(arch)
        except ProfileError:
            raise NotJudgeable(f"no virtual profile for {arch}") from None

    @functools.cached_property
    def _incompatibility(self) -> str | None:
        """Why these sources cannot be instantiated by the harness (compat.py), None if they can."""
        return incompatibility(self.sources.root)

    def _mode(self, case: MoeCase) -> str:
        """How this case is judged here: ``hardware``, ``virtual`` or ``compile``.

        ``auto`` takes the GPU when it is the case's arch, else the case's virtual profile;
        a case neither can judge raises NotJudgeable (it is skipped, saying what was found).
        """
        if (reason := self._incompatibility) is not None:
            raise NotJudgeable(
                f"FlashInfer {self.sources.version} cannot be judged by this harness: {reason}"
            )
        return self.device_for(case.arch, case.sm)

    def judged_through(self, case: MoeCase) -> Stage | None:
        """How far ``case`` will be judged here, from the device it would use (no compile, no
        device initialisation): a virtual device stops at launch."""
        try:
            mode = self.device_for(case.arch, case.sm)
        except (NotJudgeable, UnusableEnvironment):
            return None
        return {"hardware": Stage.NUMERICS, "virtual": Stage.LAUNCH, "compile": Stage.COMPILE}[mode]

    def device_for(self, arch: str, sm: int) -> str:
        """How cases of ``arch`` are judged here (:meth:`_mode`, without the sources' check):
        raises NotJudgeable for an arch nothing here judges, UnusableEnvironment for one the
        virtual device asked for cannot load."""
        device = self.settings.device
        if device.kind == "compile":
            return "compile"
        if device.kind == "virtual":
            check_device(device, [arch])
            self._profile_of(arch)
            return "virtual"
        gpu = self.gpu
        if gpu is not None and gpu.sm == sm:
            return "hardware"
        found = f"found {gpu.arch}: {gpu.describe()}" if gpu else "found no GPU"
        if device.kind == "auto" and arch in BUILTIN:
            return "virtual"
        raise NotJudgeable(
            f"{arch} is not present ({found}); --tile-device virtual judges it on a "
            "virtual device, --tile-device compile only compiles it"
        )

    # -- what the tool can build against these sources (:mod:`.probe`) ------------------
    @functools.cached_property
    def _probe(self) -> ReleaseProbe:
        home, salt, _ = self.toolchain
        features, front = release_features(self.sources.root), front_end(self.sources, home)
        return ReleaseProbe(
            self.settings.cache_dir, features, salt, front, lambda c: " ".join(self._command(c, False)[0])
        )

    def _limitations(
        self, cases: Sequence[MoeCase], jobs: int = 1, deadline: float | None = None
    ) -> dict[MoeCase, NotJudgeable]:
        """The cases whose family the tool cannot build against these sources, each with why
        (no probe runs past ``deadline``, a time of the cache's clock)."""
        self._probe.clock = self.cache.clock
        found = self._probe.limitations([kernel_config(case) for case in cases], jobs, deadline)
        version = self.sources.version
        return {c: NotJudgeable(found[k].reason(version)) for c in cases if (k := kernel_config(c)) in found}

    # -- building ----------------------------------------------------------------------
    def _command(self, config: KernelConfig, apart: bool) -> tuple[tuple[str, ...], Roots]:
        """The portable build script for ``config``'s arch, its harness ``apart`` or not
        (:func:`.buildscript.portable_build`), made once for each."""
        if (config.arch, apart) not in self._commands:
            home, _, runtime = self.toolchain
            self._commands[config.arch, apart] = portable_build(
                config, self.sources, home, runtime, self.settings.cache_dir, apart
            )
        return self._commands[config.arch, apart]

    def _spec(self, cases: Sequence[MoeCase], paired: bool | None = None) -> BuildSpec:
        """The build of one translation unit holding ``cases`` (one arch); ``paired`` (default:
        with the sequence stage) also each one's fc1 -> fc2 partner
        (:func:`.configs.sequence_partner`), which pairs with it there."""
        configs = list(dict.fromkeys(kernel_config(case) for case in cases))
        if self.settings.sequence > 0 if paired is None else paired:
            partners = [p for c in configs if (p := sequence_partner(c)) is not None]
            configs = list(dict.fromkeys([*configs, *partners]))
        apart = harness_apart(len(configs))
        command, roots = self._command(configs[0], apart)
        label = cases[0].id if len(cases) == 1 else f"{len(configs)} instantiations: {cases[0].id} ..."
        path_s, cpu_s = unit_seconds(cases[0].sm, len(configs), configs[0].mixed)
        return BuildSpec(
            source=generate_translation_unit(configs, self._probe.features, self.sources.version),
            command=command,
            salt=self.toolchain[1],
            ram_bytes=compile_ram(cases[0].sm, len(configs)),
            label=label,
            roots=roots,
            path_s=path_s,
            cpu_s=cpu_s,
            sources=SOURCE_ROOTS,
            inputs=self._build_inputs(),
        )

    def _other_mode(self, case: MoeCase, unit: Sequence[MoeCase]) -> BuildSpec | None:
        """``case``'s own entry as a run in the other mode (with the sequence stage or without
        it) names it, where ``unit``, the cases of the unit it was built in, holds what that
        entry needs: a unit built for one mode then serves the other whatever units that run
        plans (the planner keeps a tile's two GEMMs in one unit, :func:`.planner.pair_key`)."""
        paired = self.settings.sequence <= 0
        partner = sequence_partner(kernel_config(case))
        if partner is None:  # its one entry serves both modes
            return None
        if paired and partner not in {kernel_config(c) for c in unit}:
            return None
        return self._spec([case], paired=paired)

    def _build_inputs(self) -> tuple[BuildInput, ...]:
        """What every unit's build reads besides its source (the runtime once it is checked)."""
        if self._input_list is None or self._input_list[0] != self._runtime_digest:
            _, _, runtime = self.toolchain
            cache = self.settings.cache_dir
            fingerprint = self.sources.remembered_fingerprint(cache)
            inputs = build_inputs(self.sources, fingerprint, cache, runtime, self._runtime_digest)
            self._input_list = (self._runtime_digest, inputs)
        return self._input_list[1]

    def is_built(self, case: MoeCase) -> bool | None:
        """Whether ``case``'s build is in the cache (an entry's presence: it is checked when
        used); None when it would not be compiled here (skipped, or judged by codegen)."""
        try:
            self.device_for(case.arch, case.sm)
            spec = self._spec([case])
        except (NotJudgeable, UnsupportedConfig):
            return None
        return self.cache.has(spec)

    def prepare(self, cases: Sequence[MoeCase]) -> None:
        """Build every judgeable case of this worker before the first one runs, in parallel.

        Cases without a cache entry are compiled in shared units (:mod:`.planner`); each
        case's own entry then points at its unit, so later runs find it whatever the grouping.
        With ``--tile-build-limit`` the compiles stop when it has passed: the cases built by then
        are judged, the others skipped (what was finished is cached, so a rerun goes on).
        """
        limit = self.settings.build_limit  # the runtime's build and the probes count, though not stopped
        deadline = None if limit is None else self.cache.clock() + limit
        specs: dict[MoeCase, BuildSpec] = {}
        first_on_gpu: MoeCase | None = None
        for case in cases:
            try:
                if self._mode(case) == "hardware":
                    self._hardware_runner.start()
                    first_on_gpu = first_on_gpu or case
                specs[case] = self._spec([case])
            except NotJudgeable:
                continue
            except UnsupportedConfig as exc:
                self._builds[case] = self._unsupported(exc)
        # the families the tool cannot build here (:mod:`.probe`); a cached failure is the
        # kernel's verdict only where its family builds, so its family is probed too
        found = {case: self.cache.lookup(spec) for case, spec in specs.items()}
        unbuilt = [case for case, built in found.items() if built is None or not built.ok]
        jobs = self._units.jobs(list(specs.values()))[1]
        compiling, abandon = threading.Event(), threading.Event()
        with ThreadPoolExecutor(2) as pool, self.cache.telling_compiles(compiling.set):
            probing = pool.submit(self._limitations, unbuilt, jobs, deadline)
            if first_on_gpu is not None and unbuilt:
                pool.submit(self._ready_beside_compile, first_on_gpu, compiling, abandon)
            try:
                # one instantiation to build (a first verdict): the probe, the harness's front end,
                # runs beside its compile instead of before it; with more, it comes first, so that
                # nothing of a family the tool cannot build is compiled
                if len(one_per_build({c: specs[c] for c, built in found.items() if built is None})) > 1:
                    self._limit(probing.result(), specs)
                if specs:
                    self._build_missing(specs, deadline, limit)
                self._limit(probing.result(), specs)
                if first_on_gpu is not None:
                    self._hardware_runner.ready()  # built and started beside the compile
            except BaseException:
                abandon.set()
                raise
            finally:
                compiling.set()

    def _ready_beside_compile(
        self, case: MoeCase, compiling: threading.Event, abandon: threading.Event
    ) -> None:
        """Make hardware case ``case``'s inputs (:meth:`.numerics.prepared.WorkerInputs.make_ready`)
        once the compilers run, not before: starting CUDA here holds this process while it
        would start them. Not at all when the build ended in an error."""
        compiling.wait()
        if not abandon.is_set():
            self._inputs.make_ready(case)

    def _limit(self, limitations: dict[MoeCase, NotJudgeable], specs: dict[MoeCase, BuildSpec]) -> None:
        """Judge the cases of families the tool cannot build as such, whatever was built."""
        for case, limitation in limitations.items():
            self._builds[case] = limitation
            specs.pop(case, None)

    def _build_missing(
        self, specs: dict[MoeCase, BuildSpec], deadline: float | None, limit: float | None
    ) -> None:
        """Build every case of ``specs`` without a cache entry: in shared units, then alone."""
        workers = max(1, self.settings.worker_count)
        # one case for each instantiation: the cases of one configuration (its problems, PDL on
        # and off) share one build, and units are planned in instantiations, not cases
        builds = one_per_build(specs)
        missing = [case for case in builds if self.cache.lookup(specs[case]) is None]
        if missing:
            self._build_runtime()  # the builds read it: their inputs now name its checked sum
            specs = {case: self._spec([case]) for case in specs}
        most = self.settings.group or DEFAULT_GROUP
        if len(missing) > 1 and most > 1:
            self._units.build_shared(missing, specs, most, deadline)
        ordered = [specs[case] for case in builds]
        # xdist workers share one build queue through the cache's locks; starting at
        # different places lets each claim its own part first
        start = self.settings.worker_index * len(ordered) // workers
        host_jobs, jobs = self._units.jobs(ordered)
        built = self.cache.build(
            ordered[start:] + ordered[:start], jobs, self._units.claim(ordered), self._units.cores(), deadline
        )
        for case, spec in specs.items():
            self._builds[case] = built.get(spec.key) or NotJudgeable(
                f"not built: the build time limit (--tile-build-limit {limit:g} s) passed before its "
                "translation unit was compiled; the units finished are cached, so a rerun goes on from them"
            )
        failed = [unit.environment for unit in built.values() if unit.environment is not None]
        if failed:  # the host's doing, and the same run would fail again: stop here
            ram = max(spec.ram_bytes for spec in ordered)
            raise UnusableEnvironment(compile_failed_message(failed, host_jobs, ram, self.settings.cache_dir))

    def _unsupported(self, exc: UnsupportedConfig) -> Verdict:
        return Verdict(
            Stage.COMPILE,
            Stage.COMPILE,
            source=f"codegen (flashinfer {self.sources.version})",
            status="not instantiable",
            detail=str(exc),
            device=Device("build", "codegen"),
        )

    def _build(self, case: MoeCase) -> BuildResult | Verdict | NotJudgeable:
        if case not in self._builds:
            try:
                spec = self._spec([case])  # an instantiation codegen refuses is a verdict, with no build
            except UnsupportedConfig as exc:
                return self._unsupported(exc)
            if self.cache.lookup(spec) is None and (limitation := self._limitations([case])):
                return limitation[case]
            self._build_runtime()
            spec = self._spec([case])
            built = self.cache.build([spec], self._units.jobs([spec])[1], cores=self._units.cores())
            self._builds[case] = built[spec.key]
        return self._builds[case]

    # -- judging -----------------------------------------------------------------------
    def judge(self, case: MoeCase) -> Verdict:
        verdict = self._judge(case)
        if self.settings.release is not None:  # judged against a --tile-flashinfer release
            verdict.extra["flashinfer_release"] = self.settings.release
        return verdict

    def finish(self) -> None:
        """The session is over: undo what judging changed in this process (torch's threads, the
        garbage collector's freeze and clock)."""
        self._settling.restore()

    def _judge(self, case: MoeCase) -> Verdict:
        mode = self._mode(case)
        build = self._build(case)
        if isinstance(build, NotJudgeable):
            raise NotJudgeable(*build.args)
        if isinstance(build, Verdict):
            return build
        base = {"flashinfer": self.sources.version, "build": str(build.path)}
        if build.environment is not None:  # not the source's doing: no verdict; one line ends the session
            ram = compile_ram(case.sm, 1)
            jobs = self.settings.jobs or parallel_jobs([], per_job=ram)
            raise UnusableEnvironment(
                compile_failed_message([build.environment], jobs, ram, self.settings.cache_dir)
            )
        if not build.ok and harness_error(build.first_error):
            # our harness or generated unit, not the instantiation, failed to compile: no verdict
            raise NotJudgeable(
                f"the tool's harness or generated unit does not compile against FlashInfer "
                f"{self.sources.version} ({family(kernel_config(case))}): {build.first_error}"
            )
        if not build.ok:
            return Verdict(
                Stage.COMPILE,
                Stage.COMPILE,
                source=f"nvcc (flashinfer {self.sources.version})",
                status="compile error",
                detail=build.first_error,
                extra=base,
                device=Device("build", "nvcc"),
            )
        if mode == "compile":
            return Verdict(
                None, Stage.COMPILE, source="compile only", extra=base, device=Device("build", "compile only")
            )
        if mode == "virtual":
            return self._run_virtual(case, build, base)
        return self._run(case, build, base)

    def _settle_case(self, case: MoeCase) -> None:
        """Settle this process for ``case`` (:meth:`.settling.CaseSettling.settle`)."""
        self._settling.settle(case)

    def _run_virtual(self, case: MoeCase, build: BuildResult, base: dict[str, Any]) -> Verdict:
        from .numerics.runfiles import write_inputs
        from .run_faults import predicted_fault

        if (refusal := virtual_refusal(case)) is not None:  # before any of it is made
            raise NotJudgeable(refusal)
        self._settle_case(case)
        profile = self._profile(case)
        with tempfile.TemporaryDirectory(prefix="tileconform-virtual-") as tmp:
            run_dir = Path(tmp)
            entries = hardware.harness_entries(case, self.settings, on_hardware=False)
            write_inputs(self._inputs.get(case, "cpu").inputs, run_dir, extra_problem=entries)
            # a failure the host can decide from the problem and the instantiation (virtual/faults.py)
            fault = predicted_fault(kernel_config(case), case.axes.problem)
            self._before_run(case, run_dir)
            args = [str(run_dir), kernel_config(case).name]
            with build.running(build.artifact.name + VIRTUAL_SUFFIX) as executable:  # the checked bytes
                run = run_virtual(executable, args, run_dir, profile, self.settings.timeout)
            report = HarnessReport.read(run_dir)
            verdict = verdict_of(
                run, report, f"virtual ({profile.arch} profile)", profile.device, fault=fault
            )
        verdict.extra.update(base)
        verdict.extra.update(hardware.launch_record(case, self.settings))
        return verdict

    def _run(self, case: MoeCase, build: BuildResult, base: dict[str, Any]) -> Verdict:
        self._settle_case(case)
        gpu = self.gpu
        assert gpu is not None  # _mode made sure
        device = self._inputs.hardware_device()
        return hardware.judge(
            case,
            self._inputs.get(case, device),
            build,
            base,
            gpu,
            self.settings,
            self._execute,
            self._before_run,
            self._sanitize,
            full=self._inputs.full(case, device),
        )

    @functools.cached_property
    def _inputs(self) -> WorkerInputs:
        from .numerics.prepared import WorkerInputs  # it needs torch

        return WorkerInputs(self.settings.seed)

    def _execute(self, build: BuildResult, run_dir: Path, name: str) -> tuple[HarnessReport, str | None]:
        """Run case ``name`` of ``build``'s checked harness in this worker's runner
        (:func:`.hardware.execute`)."""
        unit = build.runnable()
        return hardware.execute(self._hardware_runner, unit, run_dir, name, self.settings.timeout)

    def _sanitize(self, build: BuildResult, run_dir: Path, name: str) -> SanitizerRun:
        """Run case ``name`` of ``build``'s checked harness under compute-sanitizer
        (:mod:`.sanitizer`), through the runner's one-case mode, in a process of its own."""
        mode = self.settings.sanitize
        assert mode is not None  # judge asks only with --tile-sanitize
        tool = find_sanitizer(self.toolchain[0])
        runner = self._hardware_runner.executable
        return sanitize(tool, mode, runner, build.runnable(), run_dir, name, self.settings.timeout)
