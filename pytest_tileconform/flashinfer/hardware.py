"""A case on the GPU: its inputs written, the harness run in this worker's runner (:mod:`.runner`),
D checked against torch's reference, the case run once more on the full-mantissa input family
(:mod:`.numerics.full`: precision, where the exact family sees layout), then the stages that run
the case again (``graph``, ``repeat``, ``sanitize``), and where the case's time went.

The stages are judged in their order (:class:`..verdict.Stage`): a case whose checked run is
wrong fails at ``numerics`` even when a later stage also went wrong. D of a graph replay or of
a repeat must equal the checked run's bit for bit where the epilogue is deterministic; where it
is not (finalize with red.add: several rows reduce into one output row in an order the
schedule decides), the run that changed D most is checked against the reference instead.

torch is imported inside :func:`judge`, not at plugin load: most pytest runs never judge on
hardware.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..compile.cache import BuildResult
from ..core.devices import Gpu
from ..core.gctime import COLLECTOR_TIME
from ..verdict import Device, Stage, Verdict
from .axes import MoeCase
from .buildscript import kernel_config
from .configs import dynamic_fallback
from .harness_report import HarnessReport
from .runner import HarnessRunner
from .sanitizer import SanitizerRun
from .settings import Settings

if TYPE_CHECKING:
    import torch

    from .numerics.prepared import Prepared
    from .numerics.shared_operands import SharedOperands
    from .numerics.tolerance import NumericsReport

#: Called with a case and its run directory once the inputs are there, before the harness runs.
BeforeRun = Callable[[MoeCase, Path], None]
#: Runs case NAME of the harness of the checked BUILD on the inputs in RUN_DIR: (build, run_dir,
#: name) -> what the harness reported and, if the process running it failed, why (:func:`execute`
#: of ``build.runnable()``, its checked bytes: :mod:`..compile.handles`).
Execute = Callable[[BuildResult, Path, str], tuple[HarnessReport, str | None]]
#: Runs case NAME of the harness of BUILD under compute-sanitizer on RUN_DIR's inputs (:mod:`.sanitizer`).
Sanitize = Callable[[BuildResult, Path, str], SanitizerRun]

#: The oldest architecture on which FlashInfer enables programmatic dependent launch by default
#: (``device_support_pdl``: compute capability 9 and later).
PDL_SINCE_SM = 90


def gpu_device(gpu: Gpu) -> Device:
    """What a verdict judged on ``gpu`` names as its device."""
    return Device("hardware", gpu.name, gpu.arch, f"{gpu.sm // 10}.{gpu.sm % 10}")


def pdl_for(case: MoeCase) -> bool:
    """Whether ``case`` launches with programmatic dependent launch: its ``pdl``, else what
    FlashInfer's ``cutlass_fused_moe`` does with ``enable_pdl=None`` on the case's arch."""
    return case.axes.pdl if case.axes.pdl is not None else case.sm >= PDL_SINCE_SM


def harness_entries(
    case: MoeCase, settings: Settings, *, on_hardware: bool
) -> dict[str, int | tuple[int, ...]]:
    """problem.txt's entries beside the problem's own (PROTOCOL.md): PDL always; a dynamic-CGA
    case's runtime clusters; on hardware the timing and the stages that run the case again."""
    entries: dict[str, int | tuple[int, ...]] = {"enable_pdl": int(pdl_for(case))}
    if case.axes.dynamic_cluster is not None:
        entries["cluster_shape"] = case.axes.dynamic_cluster[:2]
        entries["fallback_cluster_shape"] = dynamic_fallback(case.axes.dynamic_cluster)[:2]
    if on_hardware:
        entries.update(
            timing_iters=settings.timing_iters,
            graph_replays=settings.graph_replays,
            repeats=settings.repeats,
        )
        if settings.sequence > 0:
            entries["sequence"] = (settings.sequence, settings.sequence)
    return entries


def launch_record(case: MoeCase, settings: Settings) -> dict[str, Any]:
    """What every verdict records about how its case was launched and its inputs made: the
    input seed (``--tile-seed``; a preset's routing seed is part of its problem), the problem
    (its name, or the problem written out) and PDL."""
    problem = case.axes.problem.name or case.axes.problem.flow()
    return {"seed": settings.seed, "problem": problem, "pdl": pdl_for(case)}


def execute(
    runner: HarnessRunner, unit: Path, run_dir: Path, name: str, timeout: float
) -> tuple[HarnessReport, str | None]:
    """Run case ``name`` of the harness ``unit`` in ``runner``; return its report and, if the
    runner itself failed, why."""
    run = runner.run(unit, run_dir, name, timeout)
    if run.unmapped:  # the case never ran: this host's fault, not a verdict on the case
        raise RuntimeError(run.failure)
    failure = run.failure
    report = HarnessReport.read(run_dir)
    if failure is not None and report.decided_before_run:
        failure = None  # the harness reached its own verdict before the process failed
    return report, failure


class _Check:
    """D of the case's runs against its reference (made once, when first needed): read from the
    run directory's files, or from the buffers the harness copied it into (``shared``)."""

    def __init__(
        self, case: MoeCase, prepared: Prepared, run_dir: Path, shared: SharedOperands | None
    ) -> None:
        self.case, self.prepared, self.run_dir, self.shared = case, prepared, run_dir, shared
        self.seconds: dict[str, float] = {}

    def _read(self, name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """D and, for an MXFP8 D, the scales the kernel wrote beside it."""
        from .numerics.runfiles import read_output, read_output_scales

        inputs = self.prepared.inputs
        if self.shared is not None:
            return self.shared.output(name, inputs)
        where = self.run_dir
        if name != "d.bin":  # read_output reads a folder's d.bin: give the saved D one of its own
            where = self.run_dir / name.removesuffix(".bin")
            where.mkdir(exist_ok=True)
            (where / "d.bin").unlink(missing_ok=True)
            os.link(self.run_dir / name, where / "d.bin")
        return read_output(where, inputs), read_output_scales(where, inputs)

    def __call__(self, name: str) -> NumericsReport:
        from .numerics.activation import with_scales
        from .numerics.tolerance import compare

        started = time.perf_counter()
        actual, scales = self._read(name)
        read_done = time.perf_counter()
        expected = self.prepared.expected()  # shared by the cases of this problem
        if scales is not None:  # an MXFP8 D: checked given the kernel's scales
            expected = with_scales(expected, scales)
        reference_done = time.perf_counter()
        report = compare(actual, expected)
        done = time.perf_counter()
        for part, seconds in (
            ("check_read", read_done - started),
            ("check_reference", reference_done - read_done),
            ("check_compare", done - reference_done),
        ):
            self.seconds[part] = round(self.seconds.get(part, 0.0) + seconds, 4)
        return report


def replay_failure(stage: Stage, fields: Mapping[str, Any], deterministic: bool, check: _Check) -> str | None:
    """Why the runs of ``stage`` (the harness's ``graph`` or ``repeat`` record) fail it, None if
    they do not: D changed where it may not, or changed beyond what the reference allows."""
    changed, runs = fields.get("changed_runs", 0), fields.get("runs", 0)
    if not changed:
        return None
    most = fields.get("most_changed_elements")
    what = f"{changed} of {runs} {stage.value} runs changed D (up to {most} elements)"
    if deterministic:
        return f"{what}; the epilogue is deterministic, so D must not change"
    saved = fields.get("saved")
    numerics = check(saved) if isinstance(saved, str) else None
    if numerics is None:
        return f"{what}; the harness saved no D of them"
    if not numerics.ok:
        return f"{what}, beyond what the reduction order allows: {numerics.summary()}"
    return None


def hand_over(
    prepared: Prepared, run_dir: Path, entries: Mapping[str, int | tuple[int, ...]], settings: Settings
) -> tuple[SharedOperands | None, str]:
    """Give the harness ``prepared``'s inputs in ``run_dir``: in device memory where they are
    on the GPU and this process can share them (:mod:`.numerics.shared_operands`), else as files. Returns
    the shared operands (None for files) and how they were handed over, for the verdict."""
    from .numerics.runfiles import write_inputs, write_problem
    from .numerics.shared_operands import SharingError

    inputs = prepared.inputs
    how = "files"
    if inputs.device.type == "cuda":
        try:
            shared = prepared.shared()
            write_problem(inputs, run_dir, extra_problem=entries)
            shared.write(
                run_dir,
                graph=settings.graph_replays > 0,
                repeat=settings.repeats > 0,
                sequence=settings.sequence > 0,
            )
            return shared, "device memory"
        except SharingError as exc:
            how = f"files (device memory could not be shared: {exc})"
    write_inputs(inputs.to("cpu"), run_dir, extra_problem=entries)
    return None, how


def judge(
    case: MoeCase,
    prepared: Prepared,
    build: BuildResult,
    base: dict[str, Any],
    gpu: Gpu,
    settings: Settings,
    execute: Execute,
    before_run: BeforeRun,
    sanitize: Sanitize,
    full: Prepared | str | None = None,
) -> Verdict:
    """``case``'s verdict from its unit ``build`` run on ``gpu`` through ``execute`` (and, with
    ``settings.sanitize``, ``sanitize``), its inputs and expected D from ``prepared``; ``base``
    starts every verdict's ``extra``. ``full``: the full-mantissa input family's inputs
    (:mod:`.numerics.full`), run once more and judged within the numerics stage, or why the
    case has none."""
    from .numerics.runfiles import write_inputs

    source = f"hardware ({gpu.describe()})"
    run_dir = Path(tempfile.mkdtemp(prefix="tileconform-run-"))
    started = time.perf_counter()
    collected = COLLECTOR_TIME.seconds
    try:
        entries = harness_entries(case, settings, on_hardware=True)
        shared, handed = hand_over(prepared, run_dir, entries, settings)
        before_run(case, run_dir)
        inputs_done = time.perf_counter()
        name = kernel_config(case).name
        report, failure = execute(build, run_dir, name)
        harness_done = time.perf_counter()
        # where a case's time goes beside the kernel: writing its inputs, the harness call
        # (the runner's round trip included) and, below, the check of D
        seconds = {
            "inputs": round(inputs_done - started, 4),
            "harness": round(harness_done - inputs_done, 4),
        }
        extra: dict[str, Any] = {
            **base,
            **launch_record(case, settings),
            "graph_replays": settings.graph_replays,
            "repeats": settings.repeats,
            "sequence": settings.sequence,
            "gpu": f"{gpu.index} ({gpu.uuid})",
            "operands": handed,
            "seconds": seconds,
        }
        replaying = (Stage.GRAPH, Stage.REPEAT, Stage.SEQUENCE)
        extra.update(report.given("kernel_ms", "device", "cuda_error", *(stage.value for stage in replaying)))
        # kernel runs of the case: the checked one, each replay and repeat, each timed call
        extra["launches"] = (
            1
            + settings.timing_iters
            + sum(
                int(fields.get("runs", 0))
                for fields in (extra.get(stage.value) for stage in replaying)
                if isinstance(fields, dict)
            )
        )
        if report.cleared_errors:
            extra["cleared_errors"] = report.cleared_errors
        # the stages this verdict speaks for: numerics, those the harness says it ran, and
        # the sanitizer when asked for (taken back below if this host cannot run it)
        judged = [Stage.NUMERICS]
        judged += [stage for stage in replaying if isinstance(report.fields.get(stage.value), dict)]
        if settings.sanitize:
            judged.append(Stage.SANITIZE)
        extra["stages"] = [stage.value for stage in judged]

        def verdict(stage: Stage | None, status: str = "", detail: str = "") -> Verdict:
            return Verdict(
                stage,
                judged[-1],
                source,
                status=status,
                detail=detail,
                smem_requested=report.smem_requested,
                smem_limit=report.smem_limit,
                workspace_bytes=report.workspace_bytes,
                extra=extra,
                device=gpu_device(gpu),
            )

        check = _Check(case, prepared, run_dir, shared)

        def numerics_failure() -> Verdict | None:
            """The checked run's D against the reference: a NUMERICS verdict if it is wrong."""
            usage = resource.getrusage(resource.RUSAGE_SELF)
            check_started = time.perf_counter()
            numerics = check("d.bin")
            after = resource.getrusage(resource.RUSAGE_SELF)
            seconds["check"] = round(time.perf_counter() - check_started, 4)
            # what the operating system did to the process meanwhile: page faults and
            # preemptions show when torch's threads were held up (settling.case_threads)
            extra["check_usage"] = {
                "minor_faults": after.ru_minflt - usage.ru_minflt,
                "major_faults": after.ru_majflt - usage.ru_majflt,
                "involuntary_switches": after.ru_nivcsw - usage.ru_nivcsw,
            }
            extra["numerics"] = numerics.summary()
            return None if numerics.ok else verdict(Stage.NUMERICS, "mismatch", numerics.summary())

        def full_failure() -> Verdict | None:
            """The full family: one more run of the case on those inputs (no other stage, no
            timing), its D against their interval; a NUMERICS verdict if it is outside."""
            if full is None:
                return None
            if isinstance(full, str):
                extra["numerics_full"] = full
                return None
            full_dir = run_dir / "full"
            full_dir.mkdir()
            once = {**entries, "timing_iters": 0, "graph_replays": 0, "repeats": 0}
            once.pop("sequence", None)
            full_started = time.perf_counter()
            shared_full, _ = hand_over(
                full, full_dir, once, replace(settings, graph_replays=0, repeats=0, sequence=0)
            )
            before_run(case, full_dir)
            full_report, full_fault = execute(build, full_dir, name)
            extra["launches"] += 1
            if full_fault is not None or not full_report.passed:
                why = full_fault or full_report.message
                stage = full_report.interrupted_stage or full_report.stage or Stage.RUN
                return verdict(stage, full_fault or full_report.status, f"full-mantissa inputs: {why}")
            numerics = _Check(case, full, full_dir, shared_full)("d.bin")
            seconds["full"] = round(time.perf_counter() - full_started, 4)
            extra["numerics_full"] = numerics.summary()
            if numerics.ok:
                return None
            return verdict(Stage.NUMERICS, "mismatch", f"full-mantissa inputs: {numerics.summary()}")

        def finish(result: Verdict) -> Verdict:
            seconds.update(check.seconds)
            seconds["gc"] = round(COLLECTOR_TIME.seconds - collected, 4)  # within the parts above
            return result

        if failure is not None:
            stage = report.interrupted_stage or Stage.RUN
            if stage is not Stage.RUN and (wrong := numerics_failure()) is not None:
                return finish(wrong)
            return finish(verdict(stage, failure, failure))
        if report.setup_failed:  # the harness never reached the launcher: our fault, not a verdict
            raise RuntimeError(f"harness setup failed: {report.describe()}")
        if not report.passed:
            stage = report.stage or Stage.RUN
            if stage in replaying and (wrong := numerics_failure()) is not None:
                return finish(wrong)
            return finish(verdict(stage, report.status, report.message))
        if (wrong := numerics_failure() or full_failure()) is not None:
            return finish(wrong)
        deterministic = not report.use_reduction
        for stage in replaying:
            fields = report.fields.get(stage.value)
            if isinstance(fields, dict) and (why := replay_failure(stage, fields, deterministic, check)):
                return finish(verdict(stage, "changed", why))
        if settings.sanitize:
            if shared is not None:  # compute-sanitizer's run reads files, in a process of its own
                write_inputs(prepared.inputs.to("cpu"), run_dir, extra_problem=entries)
            sanitized = sanitize(build, run_dir, name)
            extra["sanitizer"] = sanitized.as_dict()
            if sanitized.result == "unavailable":
                judged.remove(Stage.SANITIZE)  # not judged here: the verdict says so and why
                extra["stages"] = [stage.value for stage in judged]
            elif sanitized.failed_stage:
                return finish(verdict(Stage.SANITIZE, sanitized.result, sanitized.summary))
        return finish(verdict(None))
    finally:
        if not settings.keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
