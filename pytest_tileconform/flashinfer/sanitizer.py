"""The ``sanitize`` stage: a case run once more under NVIDIA's compute-sanitizer, in a process of
its own (the runner's one-case mode, ``runner UNIT RUN_DIR CASE``), its report kept next to that
run's verdict.json.

The run gets the case's inputs without the graph, repeat and timing stages (each would only
repeat the kernel under a tool that slows it a hundredfold). For ``initcheck`` the harness is
told not to poison memory (problem.txt ``poison 0``): the poison is a write, and initcheck must
see memory nobody wrote.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness_report import HarnessReport

#: the report's name in the sanitized run's folder
REPORT = "sanitizer.log"
#: compute-sanitizer's exit status when its tool reported an error (``--error-exitcode``)
ERROR_EXIT = 86
#: problem.txt keys the sanitized run leaves out (the stages that only repeat the kernel)
REPEATING_KEYS = ("graph_replays", "repeats", "sequence", "timing_iters")

_SUMMARY = re.compile(r"(?:ERROR SUMMARY|RACECHECK SUMMARY):.*?(\d+) error", re.IGNORECASE)


def find_sanitizer(cuda_home: Path | None) -> Path | None:
    """compute-sanitizer on PATH, else in the CUDA toolkit (``bin/`` or ``compute-sanitizer/``)."""
    found = shutil.which("compute-sanitizer")
    if found is not None:
        return Path(found)
    if cuda_home is None:
        return None
    for candidate in (
        cuda_home / "bin" / "compute-sanitizer",
        cuda_home / "compute-sanitizer" / "compute-sanitizer",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass(frozen=True)
class SanitizerRun:
    """What compute-sanitizer said about one case; ``result`` is ``clean``, ``errors`` (the
    tool reported some), ``failed`` (the sanitized run did not complete: a timeout, a harness
    that did not pass under the tool) or ``unavailable`` (this host cannot run it)."""

    mode: str
    result: str
    errors: int | None = None
    report: str | None = None  #: the report file
    summary: str = ""

    @property
    def failed_stage(self) -> bool:
        return self.result in ("errors", "failed")

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "result": self.result,
            "errors": self.errors,
            "report": self.report,
            "summary": self.summary,
        }


def sanitized_inputs(run_dir: Path, mode: str) -> Path:
    """A folder beside ``run_dir`` with its inputs for the sanitized run (hard links where the
    file system allows): problem.txt without the repeating stages, and ``poison 0`` for
    initcheck. It is kept: it holds the report."""
    target = run_dir.parent / f"{run_dir.name}-{mode}"
    target.mkdir()
    for source in run_dir.glob("*.bin"):
        if source.name.startswith("d."):
            continue  # outputs of the checked run
        try:
            os.link(source, target / source.name)
        except OSError:
            shutil.copyfile(source, target / source.name)
    lines = [
        line
        for line in (run_dir / "problem.txt").read_text().splitlines()
        if line.split(" ", 1)[0] not in REPEATING_KEYS
    ]
    if mode == "initcheck":
        lines.append("poison 0")
    (target / "problem.txt").write_text("\n".join(lines) + "\n")
    return target


def sanitize(
    tool: Path | None, mode: str, runner: Path, unit: Path, run_dir: Path, case: str, timeout: float
) -> SanitizerRun:
    """Run case ``case`` of ``unit`` under ``tool --tool mode`` on a copy of ``run_dir``'s inputs."""
    if tool is None:
        return SanitizerRun(
            mode, "unavailable", summary="no compute-sanitizer on PATH or in the CUDA toolkit"
        )
    target = sanitized_inputs(run_dir, mode)
    report = target / REPORT
    command = [
        str(tool),
        "--tool",
        mode,
        "--error-exitcode",
        str(ERROR_EXIT),
        "--log-file",
        str(report),
        str(runner),
        str(unit),
        str(target),
        case,
    ]
    # a session of its own: on a timeout the tool and the harness it runs end together
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return SanitizerRun(mode, "failed", report=str(report), summary=f"timeout after {timeout:g}s")
    for name in target.glob("*.bin"):
        name.unlink()  # the inputs: only the report and the run's verdict are worth keeping
    text = report.read_text(errors="replace") if report.is_file() else output
    counted = [int(n) for n in _SUMMARY.findall(text)]
    errors = max(counted) if counted else None
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    if proc.returncode == ERROR_EXIT or (errors or 0) > 0:
        return SanitizerRun(mode, "errors", errors, str(report), last)
    verdict = HarnessReport.read(target)
    if not verdict.passed:
        why = f"under {mode} the harness stopped at {verdict.name!r}: {verdict.describe()}"
        return SanitizerRun(mode, "failed", errors, str(report), why)
    return SanitizerRun(mode, "clean", errors or 0, str(report), last)
