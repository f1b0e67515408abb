"""A case on the GPU: its inputs written, the harness run in this worker's runner (:mod:`.runner`),
D checked against torch's reference, and where the case's time went.

torch is imported inside :func:`judge`, not at plugin load: most pytest runs never judge on
hardware.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..compile.cache import BuildResult
from ..core.devices import Gpu
from ..core.gctime import COLLECTOR_TIME
from ..matrix.cases import Case
from ..verdict import Device, Stage, Verdict
from .buildscript import kernel_config
from .harness_report import HarnessReport
from .runner import HarnessRunner
from .settings import Settings

#: Called with a case and its run directory once the inputs are there, before the harness runs.
BeforeRun = Callable[[Case, Path], None]
#: Runs case NAME of the harness UNIT on the inputs in RUN_DIR: (unit, run_dir, name) -> what
#: the harness reported and, if the process running it failed, why (:func:`execute`).
Execute = Callable[[Path, Path, str], tuple[HarnessReport, str | None]]


def gpu_device(gpu: Gpu) -> Device:
    """What a verdict judged on ``gpu`` names as its device."""
    return Device("hardware", gpu.name, gpu.arch, f"{gpu.sm // 10}.{gpu.sm % 10}")


def execute(
    runner: HarnessRunner, unit: Path, run_dir: Path, name: str, timeout: float
) -> tuple[HarnessReport, str | None]:
    """Run case ``name`` of the harness ``unit`` in ``runner``; return its report and, if the
    runner itself failed, why."""
    failure = runner.run(unit, run_dir, name, timeout).failure
    report = HarnessReport.read(run_dir)
    if failure is not None and report.decided_before_run:
        failure = None  # the harness reached its own verdict before the process failed
    return report, failure


def judge(
    case: Case,
    build: BuildResult,
    base: dict[str, Any],
    gpu: Gpu,
    settings: Settings,
    execute: Execute,
    before_run: BeforeRun,
) -> Verdict:
    """``case``'s verdict from its unit ``build`` run on ``gpu`` through ``execute``; ``base``
    starts every verdict's ``extra``."""
    from .reference import make_inputs, read_output, reference_output, write_inputs
    from .tolerance import compare, policy_for

    source = f"hardware ({gpu.describe()})"
    run_dir = Path(tempfile.mkdtemp(prefix="tileconform-run-"))
    started = time.perf_counter()
    collected = COLLECTOR_TIME.seconds
    try:
        inputs = make_inputs(case, settings.seed)
        write_inputs(inputs, run_dir, extra_problem={"timing_iters": settings.timing_iters})
        before_run(case, run_dir)
        inputs_done = time.perf_counter()
        report, failure = execute(build.artifact, run_dir, kernel_config(case).name)
        harness_done = time.perf_counter()
        # where a case's time goes beside the kernel: writing its inputs, the harness call
        # (the runner's round trip included) and, below, the check of D
        seconds = {
            "inputs": round(inputs_done - started, 4),
            "harness": round(harness_done - inputs_done, 4),
        }
        extra: dict[str, Any] = {**base, "gpu": f"{gpu.index} ({gpu.uuid})", "seconds": seconds}
        extra.update(report.given("kernel_ms", "device", "cuda_error"))
        common: dict[str, Any] = {
            "judged_through": Stage.NUMERICS,
            "source": source,
            "smem_requested": report.smem_requested,
            "smem_limit": report.smem_limit,
            "workspace_bytes": report.workspace_bytes,
            "device": gpu_device(gpu),
        }
        if failure is not None:
            return Verdict(Stage.RUN, status=failure, detail=failure, extra=extra, **common)
        if report.setup_failed:  # the harness never reached the launcher: our fault, not a verdict
            raise RuntimeError(f"harness setup failed: {report.describe()}")
        if not report.passed:
            return Verdict(
                report.stage or Stage.RUN,
                status=report.status,
                detail=report.message,
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
        # the check's parts, and what the operating system did to the process meanwhile: page
        # faults and preemptions show when torch's threads were held up (settling.case_threads)
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
        if not settings.keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
