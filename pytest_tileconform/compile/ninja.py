"""One build of many compiles through ninja: a build file of one rule, each compile's output and
exit status in its own log, progress as ninja reports each compile done, an optional time limit,
and ninja's log of the compiles that succeeded. :mod:`.cache` decides what to build and keeps
what was built."""

from __future__ import annotations

import math
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .progress import BuildProgress, UnitEstimate

#: the line a failed compile's log ends with: a compile killed by a signal is not a verdict
EXIT_MARK = "tileconform: build exit status "


@dataclass(frozen=True)
class Compile:
    """One command that makes ``out``, known to ninja and to progress by ``key``."""

    key: str
    command: Sequence[str]
    out: Path
    src: Path
    log: Path
    estimate: UnitEstimate


class TimeUp(Exception):
    """The time limit passed while ninja still ran; the compiles still running were stopped."""


class Unexpressible(ValueError):
    """A command ninja's build file cannot hold: the message names the part and why."""


def _ninja_path(path: Path, workdir: Path) -> str:
    """``path`` as a build line of ``workdir/build.ninja`` names it: relative to ``workdir``
    (ninja runs there) and escaped as ninja reads paths (``$``, space, colon)."""
    text = os.path.relpath(path, workdir)
    return text.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_value(text: str) -> str:
    """``text`` as the value of a ninja variable, which ninja passes to the shell as it is."""
    return text.replace("$", "$$")


def write_build_file(workdir: Path, compiles: Sequence[Compile]) -> None:
    """``workdir/build.ninja``; ninja starts the compiles in this order. Every path and
    argument reaches the shell quoted, whatever it holds; only a line break cannot be put into
    a ninja file at all (:class:`Unexpressible`)."""
    rules = [
        "ninja_required_version = 1.3",
        "rule nvcc",
        f"  command = $cmd > $log 2>&1 || {{ status=$$?; echo {EXIT_MARK}$$status >> $log; exit $$status; }}",
        "  description = $key",
        "",
    ]
    for unit in compiles:
        for part in (*unit.command, str(unit.out), str(unit.src), str(unit.log)):
            if "\n" in part or "\r" in part:
                raise Unexpressible(f"{part!r} holds a line break, which a ninja build file cannot")
        rules += [
            f"build {_ninja_path(unit.out, workdir)}: nvcc {_ninja_path(unit.src, workdir)}",
            f"  cmd = {_ninja_value(shlex.join(unit.command))}",
            f"  log = {_ninja_value(shlex.quote(os.path.relpath(unit.log, workdir)))}",
            f"  key = {unit.key}",
            "",
        ]
    (workdir / "build.ninja").write_text("\n".join(rules))


def run(
    workdir: Path,
    compiles: Sequence[Compile],
    jobs: int,
    cores: float,
    *,
    progress: Callable[[str], None],
    clock: Callable[[], float],
    heartbeat_s: float,
    finished: list[str],
    deadline: float | None = None,
) -> None:
    """Run ``workdir``'s build, ``jobs`` compiles at a time, telling ``progress`` each compile
    done and, between, a heartbeat; ``finished`` gets the key of each compile ninja has ended
    (it stays filled when this raises). Past ``deadline`` (a time of ``clock``) it stops ninja
    and raises :class:`TimeUp`; an interrupt stops ninja too."""
    labels = {unit.key: unit.estimate.label for unit in compiles}
    tracker = BuildProgress([unit.estimate for unit in compiles], jobs, cores, clock(), heartbeat_s)
    progress(tracker.start_message())
    proc = subprocess.Popen(
        [_ninja(), "-C", str(workdir), "-k", "0", "-j", str(jobs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NINJA_STATUS": "[%f/%t] "},  # printed as each unit ends
    )
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, args=(proc.stdout,), daemon=True).start()
    step = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")
    try:
        while True:
            wake = min(tracker.next_heartbeat(), math.inf if deadline is None else deadline)
            try:
                line = lines.get(timeout=max(0.01, wake - clock()))
            except queue.Empty:
                if deadline is not None and clock() >= deadline:
                    raise TimeUp from None
                progress(tracker.heartbeat(clock()))
                continue
            if line is None:
                break
            if (match := step.match(line.strip())) and (key := match.group(3)) in labels:
                finished.append(key)
                progress(tracker.finished(labels[key], clock()))
    finally:
        if proc.poll() is None:  # stopped early: ninja stops its compiles and writes its log
            proc.terminate()
        proc.wait()
    # ninja's exit status only says whether some compile failed; each compile's log says which


def durations(workdir: Path) -> dict[str, float]:
    """Seconds each successful compile took, by the name of its output's folder, from ninja's
    own log."""
    found = {}
    try:
        lines = (workdir / ".ninja_log").read_text().splitlines()
    except OSError:
        return {}
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) >= 4:
            found[Path(fields[3]).parent.name] = (int(fields[1]) - int(fields[0])) / 1000
    return found


def _ninja() -> str:
    found = shutil.which("ninja")
    if found:
        return found
    candidate = Path(sys.executable).parent / "ninja"
    if candidate.exists():
        return str(candidate)
    raise FileNotFoundError("ninja is not installed (pip install ninja)")
