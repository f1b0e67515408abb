"""The case runner (runner.cpp, flashinfer/runner.py) with stand-in units: a small shared
library that exports ``tileconform_run_case`` and, by case name, passes, fails, loses the CUDA
context, crashes, hangs or exits. The real units are loaded by the e2e test."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pytest_tileconform.compile.hostbuild import HostBuildError, cxx
from pytest_tileconform.flashinfer.hardware import execute
from pytest_tileconform.flashinfer.runner import LOG, HarnessRunner, build_runner
from pytest_tileconform.verdict import Stage

STAND_IN_UNIT = r"""
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

// after case "slow" the unit's teardown is slow, as a CUDA runtime's can be
bool slow = false;
struct SlowTeardown {
  ~SlowTeardown() {
    if (slow) sleep(30);
  }
} slow_teardown;

extern "C" int tileconform_run_case(const char* run_dir, const char* name, int* context_lost) {
  *context_lost = 0;
  std::printf("stdout of %s\n", name);
  std::fprintf(stderr, "stderr of %s\n", name);
  if (std::strcmp(name, "missing") == 0) return 2;
  // "STAGE-then-crash": the harness wrote verdict STAGE (final unless STAGE is one of the
  // stages it writes a preliminary verdict for), then the process died
  const std::string whole = name;
  const auto cut = whole.find("-then-crash");
  const std::string stage = whole.substr(0, cut);
  const bool preliminary = stage == "run" || stage == "graph" || stage == "repeat";
  std::ofstream(std::string(run_dir) + "/verdict.json")
      << "{\"stage\": \"" << stage << "\", \"final\": " << (preliminary ? "false" : "true")
      << ", \"pid\": " << getpid() << "}";
  if (cut != std::string::npos) std::raise(SIGSEGV);
  if (std::strcmp(name, "crash") == 0) std::raise(SIGSEGV);
  if (std::strcmp(name, "hang") == 0) sleep(60);
  if (std::strcmp(name, "exit") == 0) {
    std::fprintf(stderr, "giving up\n");
    std::exit(7);
  }
  if (std::strcmp(name, "lost") == 0) *context_lost = 1;
  slow = slow || std::strcmp(name, "slow") == 0;
  return std::strcmp(name, "pass") == 0 || std::strcmp(name, "slow") == 0 ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def unit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("unit")
    (directory / "unit.cpp").write_text(STAND_IN_UNIT)
    subprocess.run(
        [cxx(), "-shared", "-fPIC", str(directory / "unit.cpp"), "-o", str(directory / "harness")], check=True
    )
    return directory / "harness"


@pytest.fixture(scope="module")
def runner_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_runner(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def runner(runner_exe: Path) -> HarnessRunner:
    return HarnessRunner(lambda: runner_exe)


def _pid(run_dir: Path) -> int:
    return int(json.loads((run_dir / "verdict.json").read_text())["pid"])


def test_cases_share_one_process_and_their_output_goes_to_their_log(
    runner: HarnessRunner, unit: Path, tmp_path: Path
) -> None:
    first = tmp_path / "a"
    second = tmp_path / "b"
    first.mkdir()
    second.mkdir()
    assert runner.run(unit, first, "pass", 30).status == 0
    assert runner.run(unit, second, "fail", 30).status == 1
    assert _pid(first) == _pid(second) and runner.started == 1
    assert (first / LOG).read_text() == "stdout of pass\nstderr of pass\n"
    assert (second / LOG).read_text() == "stdout of fail\nstderr of fail\n"
    runner.close()


@pytest.mark.parametrize(
    ("case", "failure"),
    [
        ("crash", "harness killed by SIGSEGV"),
        ("exit", "harness exited with status 7: giving up"),
        ("hang", "timeout after 1s"),
        ("missing", "has no case missing"),
    ],
)
def test_a_case_that_ends_the_runner_is_reported_and_the_next_gets_a_new_one(
    runner: HarnessRunner, unit: Path, tmp_path: Path, case: str, failure: str
) -> None:
    before = tmp_path / "before"
    before.mkdir()
    assert runner.run(unit, before, "pass", 30).status == 0
    bad = tmp_path / "bad"
    bad.mkdir()
    result = runner.run(unit, bad, case, 1)
    assert result.status is None and result.failure is not None and result.failure.endswith(failure)
    after = tmp_path / "after"
    after.mkdir()
    assert runner.run(unit, after, "pass", 30).status == 0
    same_process = case == "missing"
    assert (_pid(after) == _pid(before)) == same_process
    assert runner.started == (1 if same_process else 2)
    runner.close()


def test_a_runner_started_from_a_thread_that_ends_lives_on(
    runner: HarnessRunner, unit: Path, tmp_path: Path
) -> None:
    """runner.cpp asks for SIGKILL when what started it ends, and Linux counts that from the
    thread that forked it: a runner started from a thread that has ended since (a pool's
    worker) must still be the one that runs the cases. The thread runs a first case, so that
    the runner has asked (prctl) before the thread ends."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    starter = threading.Thread(target=lambda: (runner.start(), runner.run(unit, first, "pass", 30)))
    starter.start()
    starter.join()
    time.sleep(0.5)  # a runner killed with that thread would be dead by now
    assert runner.run(unit, second, "pass", 30).status == 0
    assert _pid(first) == _pid(second) and runner.started == 1
    runner.close()


def test_a_runner_that_cannot_be_built_says_so_when_asked(tmp_path: Path) -> None:
    def broken() -> Path:
        raise HostBuildError("compiling the case runner failed (g++ ...)")

    runner = HarnessRunner(broken)
    runner.start()  # returns at once; the build fails in the runner's thread
    with pytest.raises(HostBuildError, match="compiling the case runner failed"):
        runner.ready()
    with pytest.raises(HostBuildError):
        runner.run(tmp_path / "harness", tmp_path, "pass", 30)


def test_a_lost_context_ends_the_runner_after_its_verdict(
    runner: HarnessRunner, unit: Path, tmp_path: Path
) -> None:
    lost, after = tmp_path / "lost", tmp_path / "after"
    lost.mkdir()
    after.mkdir()
    assert runner.run(unit, lost, "lost", 30).status == 1
    assert runner.run(unit, after, "pass", 30).status == 0
    assert _pid(lost) != _pid(after) and runner.started == 2
    runner.close()


def test_a_unit_that_cannot_be_loaded_is_reported(runner: HarnessRunner, tmp_path: Path) -> None:
    not_a_library = tmp_path / "harness"
    not_a_library.write_text("not a shared library\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    result = runner.run(not_a_library, run_dir, "pass", 30)
    assert result.status is None and result.failure is not None
    assert result.failure.startswith(f"the runner could not load {not_a_library}:")
    assert "harness" in (run_dir / LOG).read_text()
    runner.close()


def test_one_case_from_the_command_line(runner_exe: Path, unit: Path, tmp_path: Path) -> None:
    proc = subprocess.run([str(runner_exe), str(unit), str(tmp_path), "fail"], capture_output=True, text=True)
    assert proc.returncode == 1 and "stdout of fail" in proc.stdout
    assert json.loads((tmp_path / "verdict.json").read_text())["stage"] == "fail"


def test_closing_does_not_wait_for_the_runner_to_tear_down(
    runner: HarnessRunner, unit: Path, tmp_path: Path
) -> None:
    assert runner.run(unit, tmp_path, "slow", 30).status == 0
    started = time.monotonic()
    runner.close()
    assert time.monotonic() - started < 3  # the unit's teardown alone takes 30 s


@pytest.mark.parametrize(
    ("case", "failure", "stage"),
    [
        ("run-then-crash", "harness killed by SIGSEGV", None),
        ("graph-then-crash", "harness killed by SIGSEGV", Stage.GRAPH),
        ("repeat-then-crash", "harness killed by SIGSEGV", Stage.REPEAT),
        ("prepare-then-crash", None, Stage.PREPARE),
        ("initialize-then-crash", None, Stage.INITIALIZE),
    ],
)
def test_a_runner_that_dies_is_charged_to_the_stage_the_harness_was_in(
    runner: HarnessRunner, unit: Path, tmp_path: Path, case: str, failure: str | None, stage: Stage | None
) -> None:
    """A process that dies during a stage that runs the kernel (its preliminary verdict names
    it) fails there; one whose harness had already decided the case leaves that verdict."""
    report, why = execute(runner, unit, tmp_path, case, 30)
    assert why == failure
    assert (report.interrupted_stage if why else report.stage) == (stage or Stage.RUN)
    runner.close()
