"""Run hardware cases in one long-lived process per worker (``runner.cpp``).

A harness unit is linked as a shared library that exports ``tileconform_run_case``. The runner
loads each unit once and runs case after case in it, so a worker pays for process start, CUDA
context creation and module loading once, not once per case. Crash isolation is kept: a case
that kills the runner, never returns, or leaves the CUDA context unusable ends that runner, and
the next case starts a new one.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..compile.hostbuild import build_once, compiler_id, cxx, run_tool, runnable

RUNNER_SOURCE = Path(__file__).resolve().parent / "runner.cpp"
#: the operand table's declarations, which runner.cpp includes
OPERANDS_HEADER = Path(__file__).resolve().parent / "harness" / "tileconform_operands.h"
RUNNER = "runner"
LOG = "harness.log"  # what a case printed, in its run directory
#: Reply statuses of runner.cpp: 0 passed, 1 any other verdict
NO_SUCH_CASE, UNLOADABLE, UNMAPPED = 2, 3, 4


def build_runner(cache_dir: Path) -> Path:
    """The runner executable, compiled once per (source, compiler). It loads every unit and
    reports every status, so it is checked before each session uses it and built again when
    it fails (:func:`..compile.hostbuild.build_once`), and what runs is the checked bytes
    (:func:`..compile.hostbuild.runnable`), whatever is swapped in under its name after."""
    compiler = cxx()

    def produce(directory: Path) -> None:
        command = [compiler, "-std=c++17", "-O2", str(RUNNER_SOURCE), "-o", str(directory / RUNNER), "-ldl"]
        run_tool(command, "compiling the case runner")

    inputs = (RUNNER_SOURCE.read_bytes(), OPERANDS_HEADER.read_bytes(), compiler_id(compiler).encode())
    return runnable(build_once(cache_dir, "runner", inputs, RUNNER, produce))


@dataclass(frozen=True)
class CaseRun:
    """How running one case went, as far as the process is concerned (the verdict itself is
    the unit's verdict.json)."""

    status: int | None  # the unit's status (0 passed, 1 other verdict); None: no reply
    failure: str | None  # why there was no reply: the runner died or timed out
    #: the runner could not map the operands of operands.txt: the case did not run
    unmapped: bool = False


class HarnessRunner:
    """One runner process, started on first use and again after a case ended it.

    The runner is built and started in a thread this object keeps for its life: runner.cpp asks
    to be killed when whatever started it ends (``PR_SET_PDEATHSIG``), and Linux counts that from
    the *thread* that started it, so a runner started from a short-lived thread dies with it."""

    def __init__(self, executable: Callable[[], Path]) -> None:
        """``executable`` gives the runner's path, building it if need be (:func:`build_runner`);
        it is called once, in the runner's thread."""
        self._build = executable
        self._path: Path | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tileconform-runner")
        self._starting: Future[subprocess.Popen[bytes]] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.started = 0  # runner processes started so far

    @property
    def executable(self) -> Path:
        return self._thread.submit(self._built).result()

    def start(self) -> None:
        """Build and start the runner in its thread, and return at once: it is built and creates
        the CUDA context while this process compiles. :meth:`ready` says how that went."""
        if self._starting is None:
            self._starting = self._thread.submit(self._process)

    def ready(self) -> None:
        """Wait for :meth:`start`; raise what stopped it (the runner's build failed)."""
        if self._starting is not None:
            self._starting.result()

    def run(self, unit: Path, run_dir: Path, case: str, timeout: float) -> CaseRun:
        proc = self._thread.submit(self._process).result()
        assert proc.stdin is not None
        try:
            # the unit's name as given: a /proc/PID/fd/N of its checked bytes must not be resolved
            proc.stdin.write(f"{os.path.abspath(unit)}\t{run_dir.resolve()}\t{case}\n".encode())
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died before reading: no reply, reported below
        reply = self._reply(proc, timeout)
        if reply is None:
            self.close()
            return CaseRun(None, f"timeout after {timeout:.0f}s")
        if not reply:
            proc.wait()  # the next run starts another
            return CaseRun(None, self._death(proc.returncode, run_dir))
        status, _, restart = reply.partition(" ")
        if restart:  # it exits by itself; not waiting for its teardown
            self.close()
        code = int(status)
        if code == UNLOADABLE:
            return CaseRun(None, f"the runner could not load {unit}: {_tail(run_dir)}")
        if code == UNMAPPED:
            return CaseRun(
                None, f"the runner could not map the case's operands: {_tail(run_dir)}", unmapped=True
            )
        if code == NO_SUCH_CASE:
            return CaseRun(None, f"{unit} has no case {case}")
        return CaseRun(code, None)

    def close(self) -> None:
        self._thread.submit(self._close).result()

    def _close(self) -> None:
        if self._proc is not None:
            _close(self._proc)
            self._proc = None

    def _built(self) -> Path:
        if self._path is None:
            self._path = self._build()
        return self._path

    def _process(self) -> subprocess.Popen[bytes]:
        """The running runner, started if need be: only ever called in the runner's thread."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [str(self._built())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
            self.started += 1
            weakref.finalize(self, _close, self._proc)
        return self._proc

    @staticmethod
    def _reply(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
        """The next reply line, "" if the runner ended first, None on timeout."""
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        data = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not data.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    return ""
                data += chunk
        return data.decode().strip()

    @staticmethod
    def _death(returncode: int, run_dir: Path) -> str:
        if returncode < 0:
            return f"harness killed by {signal.Signals(-returncode).name}"
        return f"harness exited with status {returncode}: {_tail(run_dir)}"


def _tail(run_dir: Path) -> str:
    try:
        lines = (run_dir / LOG).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _close(proc: subprocess.Popen[bytes]) -> None:
    """End a runner between cases. It is killed rather than asked to exit: it holds nothing
    that needs saving (each verdict is written before its reply), and an orderly exit would
    make pytest wait for the CUDA context and the units' runtimes to be torn down."""
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        proc.kill()
    proc.wait()
