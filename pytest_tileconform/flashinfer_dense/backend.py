"""The dense backend: each case (a tactic of a family, an output type, a problem) is built as
FlashInfer's JIT builds it (:mod:`.unit`), through the core's build cache, and run on the virtual
device of its arch through the launcher's workspace query, ``can_implement``, ``initialize`` and
``run`` (:mod:`.report` reads where it stopped).

On the virtual device no kernel runs: a case is judged through ``launch`` and numerics is unrun.
On the GPU, the families with a hardware harness (SM90 fpA_intB: :mod:`.hardware`; SM90 FP8
block-scale: :mod:`.blockscale_hardware`) run through numerics against a torch reference, the
graph and the repeat stages; a case of another family whose arch is the GPU here is not judged
rather than judged less than ``--tile-device hardware`` promises.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compile.cache import BuildResult, BuildSpec
from ..compile.caches import open_cache
from ..compile.hostbuild import HostBuildError, artifact_digest
from ..core.devices import Gpu, current_gpu
from ..core.runoptions import RunOptions
from ..dtypes import shape_label
from ..flashinfer.sources import (
    SOURCE_ROOTS,
    FlashInferSources,
    FlashInferSourcesError,
    build_salt,
    cuda_version,
    find_cuda_home,
    find_sources,
)
from ..matrix.cases import Case
from ..verdict import Device, NotJudgeable, Stage, UnusableEnvironment, Verdict
from ..virtual.build import build_runtime
from ..virtual.profiles import BUILTIN, ArchProfile, ProfileError, builtin
from ..virtual.run import run_virtual, verdict_of
from . import NAME, blockscale, fpaintb
from .axes import CLUSTER_1X1X1, DenseAxes
from .blockscale_hardware import BlockScaleReport
from .offered import DenseSourcesError, Offered, read_offered
from .report import DenseReport
from .unit import NotOffered, build_command, harnessed_archs, make_unit

#: the archs whose families have a hardware harness (numerics, graph, repeat): SM90's fpA_intB
HARDWARE_ARCHS = ("sm90",)

DenseCase = Case[DenseAxes]
PREFIX = "tileconform (flashinfer-cutlass-dense): "
#: one SM120 unit (one output type, one CTA shape, both swap_ab): about 90 s and 6.6 GB on a CPU host
#: (an fp4 unit instantiates both schedulers too)
UNIT_SECONDS = 90.0
UNIT_RAM = 7 << 30
#: the FP8 block-scale module's one build (its sources and the harness): 91 CPU-s, 1:56 wall and
#: 4.3 GB on the shared 2-core CPU machine
BLOCKSCALE_SECONDS = 120.0


@dataclass(frozen=True)
class Planned:
    """What judging one case builds and runs: its JIT module, its tactic id, its build and the
    harness's arguments after the run directory."""

    module: str
    tactic: int
    spec: BuildSpec
    args: tuple[str, ...]


class DenseBackend:
    name = NAME

    def __init__(
        self,
        options: RunOptions,
        sources: Path | None,
        progress: Callable[[str], None],
        release: str | None = None,
        refusal: str | None = None,
    ) -> None:
        """``sources``: FlashInfer's data folder (None: the installed package's); ``release``: the
        ``--tile-flashinfer`` release they are (its ident, named by every verdict); ``refusal``: why
        no case of this backend can be judged in this run (sources asked for that cannot be had)."""
        self.options = options
        self._sources_dir = sources
        self._release = release
        self._refusal = refusal
        self.cache = open_cache(
            options.cache_dir, progress, options.cache_remote, options.build_on, options.jobs
        )
        self._built: dict[str, BuildResult] = {}
        self._gpu: Gpu | bool | None = False  # False: not looked up yet

    @property
    def archs(self) -> tuple[str, ...]:
        """The archs of the families this backend has a harness for (:class:`..backend.ArchBackend`)."""
        return harnessed_archs()

    # -- what is here ----------------------------------------------------------------------------
    @functools.cached_property
    def sources(self) -> FlashInferSources:
        try:
            return find_sources(self._sources_dir)
        except FlashInferSourcesError as exc:
            raise UnusableEnvironment(f"{PREFIX}{exc}") from None

    @functools.cached_property
    def offered(self) -> Offered:
        """FlashInfer's dense families and tactics, read from these sources' generator and runners."""
        try:
            return read_offered(self.sources)
        except DenseSourcesError as exc:
            raise UnusableEnvironment(f"{PREFIX}{exc}") from None

    @functools.cached_property
    def mixed(self) -> fpaintb.MixedFamily:
        """SM90 fpA_intB: what FlashInfer's generator instantiates and its runner offers (the
        tactics probe compiled into the build cache on first use)."""
        try:
            return fpaintb.read_family(self.sources, self.toolchain[0], self.options.cache_dir, self.cache)
        except DenseSourcesError as exc:
            raise UnusableEnvironment(f"{PREFIX}{exc}") from None

    @functools.cached_property
    def blockscale_module(self) -> blockscale.BlockScaleModule:
        """SM90 FP8 block-scale GEMM: the module FlashInfer's generator compiles for this toolkit."""
        try:
            return blockscale.read_module(self.sources, cuda_version(find_cuda_home()))
        except (DenseSourcesError, FlashInferSourcesError) as exc:
            raise UnusableEnvironment(f"{PREFIX}{exc}") from None

    @functools.cached_property
    def toolchain(self) -> tuple[Path, Path, str]:
        """CUDA home, the virtual runtime every unit links, and the build salt (nvcc, FlashInfer's
        version and sources' fingerprint, the runtime's bytes)."""
        try:
            home = find_cuda_home()
            salt = build_salt(self.sources, home, self.options.cache_dir)
        except FlashInferSourcesError as exc:
            raise UnusableEnvironment(f"{PREFIX}{exc}") from None
        try:
            runtime = build_runtime(self.options.cache_dir, home)
        except HostBuildError as exc:
            raise UnusableEnvironment(f"{PREFIX}the virtual runtime does not build here: {exc}") from None
        return home, runtime, f"{salt}|runtime {artifact_digest(runtime)}"

    def places(self) -> dict[str, Path]:
        """FlashInfer's sources as ``<flashinfer>``, so compile errors read the same on every host."""
        return {"<flashinfer>": self.sources.root} if "sources" in self.__dict__ else {}

    def check_environment(self, cases: Sequence[DenseCase]) -> None:
        """FlashInfer's sources, the generator and tactic lists of the cases' families and the
        CUDA toolkit are there, for the cases that would be built here (no compile, no device)."""
        if self._refusal is not None:
            raise UnusableEnvironment(f"{PREFIX}{self._refusal}")
        for case in cases:
            try:
                self.device_for(case.arch)
            except NotJudgeable:
                continue
            try:  # each refused with one line; the fpA_intB tactics probe is built with the units
                if blockscale.is_blockscale(case):
                    self.blockscale_module  # noqa: B018
                elif fpaintb.is_mixed(case.act, case.weight):
                    fpaintb.read_ops(self.sources)
                else:
                    self.offered  # noqa: B018
            except DenseSourcesError as exc:
                raise UnusableEnvironment(f"{PREFIX}{exc}") from None
            return

    def device_for(self, arch: str) -> str:
        """``virtual`` or ``compile``; NotJudgeable where the device chosen cannot judge ``arch``."""
        device = self.options.device
        if device.kind == "compile":
            return "compile"
        if device.kind in ("auto", "hardware"):
            if self._gpu is False:
                self._gpu = current_gpu()
            gpu = self._gpu
            if isinstance(gpu, Gpu) and gpu.arch == arch and arch in HARDWARE_ARCHS:
                return "hardware"
            if isinstance(gpu, Gpu) and gpu.arch == arch:
                raise NotJudgeable(
                    f"{arch} is this host's GPU, and the dense backend has no hardware harness for "
                    "its families (numerics against a torch reference): --tile-device virtual "
                    "judges it through launch"
                )
            if device.kind == "hardware" or arch not in BUILTIN:
                raise NotJudgeable(
                    f"{arch} is not present; --tile-device virtual judges it on a virtual device"
                )
            return "virtual"
        if device.arch is not None and device.arch != arch:
            raise NotJudgeable(f"--tile-device {device} judges {device.arch} only")
        return "virtual"

    def judged_through(self, case: DenseCase) -> Stage | None:
        """A virtual case is judged through launch (no kernel runs), a compile-only one through
        compile, one on the GPU through the repeat stage."""
        try:
            mode = self.device_for(case.arch)
        except NotJudgeable:
            return None
        return {"compile": Stage.COMPILE, "hardware": Stage.REPEAT}.get(mode, Stage.LAUNCH)

    def _profile(self, arch: str) -> ArchProfile:
        try:
            return builtin(arch)
        except ProfileError:
            raise NotJudgeable(f"no virtual profile for {arch}") from None

    # -- building -----------------------------------------------------------------------------------
    def _unit(self, case: DenseCase, mode: str) -> Planned:
        """What ``case`` builds and runs; NotOffered (before anything is built) where FlashInfer
        offers no such tactic."""
        m, n, k = case.axes.mnk
        if blockscale.is_blockscale(case):
            return self._blockscale_unit(case, mode)
        if fpaintb.is_mixed(case.act, case.weight):
            op, tactic, source = fpaintb.mixed_unit(self.mixed, case, self.sources.version)
            home, runtime, salt = self.toolchain
            linked = None if mode == "hardware" else runtime
            command, roots = fpaintb.build_command(self.sources, home, self.options.cache_dir, linked)
            group = fpaintb.scale_group(k, case.axes.group)
            module, index = fpaintb.MODULE, tactic.index
            label = (
                f"{module} {op.act}x{op.weight} {op.quant} {shape_label(op.tile)} c{shape_label(op.cluster)}"
            )
            args: tuple[str, ...] = (str(m), str(n), str(k), str(group))
            files = 1
        else:
            unit = make_unit(self.sources, self.offered, case)
            home, runtime, salt = self.toolchain
            command, roots = build_command(
                self.sources, unit.family, case.sm, home, runtime, self.options.cache_dir, unit.parts
            )
            source, module, index = unit.source, unit.family.module, unit.tactic.index
            files = max(1, unit.parts)  # its kernel files compile side by side
            label = f"{module} {case.out} {shape_label(unit.tactic.cta)}"
            args = (str(int(case.axes.swap_ab)), str(m), str(n), str(k), *_tactic_tail(case))
        spec = BuildSpec(
            source=source,
            command=command,
            salt=salt,
            ram_bytes=UNIT_RAM * files,
            label=label + (" (GPU)" if mode == "hardware" else ""),
            roots=roots,
            path_s=UNIT_SECONDS,
            cpu_s=UNIT_SECONDS * files,
            sources=SOURCE_ROOTS,
        )
        return Planned(module, index, spec, args)

    def _blockscale_unit(self, case: DenseCase, mode: str) -> Planned:
        """One build for every case of the family (the module's sources and the harness); on the
        virtual device only the built-in dispatch, whose kernels are in the program."""
        module = self.blockscale_module
        blockscale.check_case(module, case)
        if mode == "virtual" and case.axes.dispatch != "static":
            raise NotJudgeable(
                "DeepGEMM's dispatch compiles its kernel with nvcc when the problem is first met and "
                "loads it through the driver, which the virtual device does not have: judged on a GPU"
            )
        home, runtime, salt = self.toolchain
        linked = None if mode == "hardware" else runtime
        command, roots = blockscale.build_command(self.sources, module, home, self.options.cache_dir, linked)
        spec = BuildSpec(
            source=blockscale.unit_source(module, self.sources.version),
            command=command,
            salt=salt,
            ram_bytes=UNIT_RAM,
            label=module.name + (" (GPU)" if mode == "hardware" else ""),
            roots=roots,
            path_s=BLOCKSCALE_SECONDS,
            cpu_s=BLOCKSCALE_SECONDS,
            sources=SOURCE_ROOTS,
        )
        return Planned(module.name, -1, spec, blockscale.harness_args(case, self.sources))

    def prepare(self, cases: Sequence[DenseCase]) -> None:
        """Build every unit this worker's cases need before the first one runs (one per output type
        and CTA shape), ``--tile-build-jobs`` at a time."""
        specs: dict[str, BuildSpec] = {}
        for case in cases:
            try:
                spec = self._unit(case, self.device_for(case.arch)).spec
            except (NotJudgeable, NotOffered):
                continue
            specs.setdefault(spec.key, spec)
        if specs:
            self._built.update(self.cache.build(list(specs.values()), self.options.jobs or 1))

    def _build(self, spec: BuildSpec) -> BuildResult:
        if spec.key not in self._built:
            self._built.update(self.cache.build([spec], self.options.jobs or 1))
        built = self._built[spec.key]
        if built.environment is not None:  # the host's doing: no verdict, the session stops
            raise UnusableEnvironment(f"{PREFIX}{spec.label} did not build here: {built.first_error}")
        return built

    # -- judging -------------------------------------------------------------------------------------
    def judge(self, case: DenseCase) -> Verdict:
        mode = self.device_for(case.arch)
        version = self.sources.version
        # every verdict names the sources it was judged against, a release's by its wheel
        named: dict[str, Any] = {"flashinfer": version}
        if self._release is not None:
            named["flashinfer_release"] = self._release
        try:
            planned = self._unit(case, mode)
        except NotOffered as exc:
            return Verdict(
                Stage.COMPILE,
                Stage.COMPILE,
                source=f"tactic list (flashinfer {version})",
                status="not offered",
                detail=str(exc),
                device=Device("build", "codegen"),
                extra=named,
            )
        built = self._build(planned.spec)
        extra: dict[str, Any] = {
            **named,
            "module": planned.module,
            "tactic": planned.tactic,
            "build": str(built.path),
        }
        if not built.ok:
            verdict = Verdict(
                Stage.COMPILE,
                Stage.COMPILE,
                source=f"nvcc (flashinfer {version})",
                status="compile error",
                detail=built.first_error,
                device=Device("build", "nvcc"),
            )
        elif mode == "compile":
            verdict = Verdict(
                None, Stage.COMPILE, source="compile only", device=Device("build", "compile only")
            )
        elif mode == "hardware" and blockscale.is_blockscale(case):
            from .blockscale_hardware import judge_on_gpu as judge_blockscale

            assert isinstance(self._gpu, Gpu)
            env = blockscale.run_env(self.toolchain[0], self.options.cache_dir)
            verdict = judge_blockscale(case, built, planned.args, env, self._gpu, self.options.timeout)
        elif mode == "hardware":
            from .hardware import judge_on_gpu

            assert isinstance(self._gpu, Gpu)
            verdict = judge_on_gpu(case, built, planned.args, self._gpu, self.options.timeout)
        else:
            verdict = self._run_virtual(case, built, planned.args)
        verdict.extra.update(extra)
        return verdict

    def _run_virtual(self, case: DenseCase, built: BuildResult, args: tuple[str, ...]) -> Verdict:
        profile = self._profile(case.arch)
        mixed = fpaintb.is_mixed(case.act, case.weight) or blockscale.is_blockscale(case)
        launch = ("launch",) if mixed else ()
        reader = BlockScaleReport if blockscale.is_blockscale(case) else DenseReport
        with tempfile.TemporaryDirectory(prefix="tileconform-dense-") as tmp:
            run_dir = Path(tmp)
            with built.running() as executable:
                run = run_virtual(
                    executable, [str(run_dir), *args, *launch], run_dir, profile, self.options.timeout
                )
            smem = run.smem_attribute
            report = reader.read(run_dir, smem.get("value") if smem else None)
            # a run that decided nothing about the case (a harness fault) raises: no verdict
            return verdict_of(run, report, f"virtual ({profile.arch} profile)", profile.device)


def _tactic_tail(case: DenseCase) -> list[str]:
    """The harness arguments past the problem: the scheduler (``1``: stream-K), then the cluster
    shape, each only where not data-parallel 1x1x1, so the families without those choices (SM12x)
    are never given them."""
    tail = [str(int(case.axes.stream_k)), *(str(c) for c in case.axes.cluster)]
    if case.axes.cluster == CLUSTER_1X1X1:
        tail = tail[:1] if case.axes.stream_k else []
    return tail
