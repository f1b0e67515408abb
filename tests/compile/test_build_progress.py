"""Build progress the user can trust: an estimate from the cost model at the start, a heartbeat
at a steady interval, and an ETA that only moves down unless a unit runs past its estimate,
which the message then names. Driven by a fake clock; then through the build cache with a
stand-in compiler, and through a pytest session's terminal."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.stand_in_flashinfer import MATRIX, QUIET, STAND_IN_CONFTEST, STAND_IN_NVCC, make_sources

from pytest_tileconform.compile import progress
from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.compile.progress import BuildProgress, UnitEstimate, duration
from pytest_tileconform.flashinfer.planner import unit_seconds
from pytest_tileconform.flashinfer.sources import ENV_SOURCES

ETA = re.compile(r"ETA (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def eta_seconds(message: str) -> float | None:
    found = ETA.search(message)
    if found is None:
        return None
    hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def sm90(label: str, size: int = 1) -> UnitEstimate:
    return UnitEstimate(label, *unit_seconds(90, size))


def run(tracker: BuildProgress, finishes: list[tuple[float, str]]) -> Iterator[tuple[float, str]]:
    """Every message of a build whose units end at the given times: heartbeats when due."""
    for when, label in finishes:
        while tracker.next_heartbeat() < when:
            now = tracker.next_heartbeat()
            yield now, tracker.heartbeat(now)
        yield when, tracker.finished(label, when)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45.4, "45s"), (99, "99s"), (185, "3m05s"), (3720, "1h02m")]
)
def test_durations_read_as_minutes_and_hours(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_the_estimate_is_there_from_the_start() -> None:
    """Two SM90 cases alone on 2 cores, 2 at a time: each keeps 1.64 cores busy, so they share
    the cores and take 55 s x 1.64 each, side by side (planner.UNIT_COST)."""
    tracker = BuildProgress([sm90("a"), sm90("b")], jobs=2, cores=2, started=0.0)
    assert (
        tracker.start_message() == "compiling 2 translation unit(s), 2 at a time, about 90s by the cost model"
    )
    assert eta_seconds(tracker.heartbeat(30.0)) == 60


def test_longer_units_and_rounds_add_up() -> None:
    """A unit of 8 (55 s x 1.77) and four cases alone, one job: one after another."""
    units = [sm90("eight", 8)] + [sm90(f"one{i}") for i in range(4)]
    tracker = BuildProgress(units, jobs=1, cores=16, started=0.0)
    assert tracker.start_message().endswith(f"about {duration(55 * 1.77 + 4 * 55)} by the cost model")


def test_the_eta_only_moves_down_while_units_keep_their_estimates() -> None:
    units = [sm90(f"u{i}") for i in range(6)]
    tracker = BuildProgress(units, jobs=2, cores=4, started=0.0)  # 55 s each, no contention
    finishes = [(50.0, "u0"), (54.0, "u1"), (100.0, "u2"), (107.0, "u3"), (150.0, "u4"), (160.0, "u5")]
    ends = []
    for now, message in run(tracker, finishes):
        assert not message.startswith("\n") and "\n" not in message
        assert ", not " not in message  # never raised
        if (eta := eta_seconds(message)) is not None:
            ends.append(now + eta)
    assert ends == sorted(ends, reverse=True)  # the promised end never moves later
    assert message.startswith("[6/6] u5 (2m40s elapsed") and "ETA" not in message


def test_an_overrun_raises_the_eta_and_says_which_unit() -> None:
    """This host compiles at half the measured speed: the first heartbeat after the first unit
    passes its estimate raises the ETA and names it; once the host's speed is learned, the
    ETA is right and moves down again."""
    units = [sm90(f"u{i}") for i in range(4)]
    tracker = BuildProgress(units, jobs=1, cores=4, started=0.0)
    messages = list(run(tracker, [(110.0, "u0"), (220.0, "u1"), (330.0, "u2"), (440.0, "u3")]))
    raised = [(now, m) for now, m in messages if ", not " in m]
    first_now, first = raised[0]
    assert first_now == 60.0
    assert re.search(r"ETA \S+, not \S+: u0 has run 60s of an estimated 55s\)?$", first), first
    done = next(m for now, m in messages if m.startswith("[1/4] u0"))
    assert eta_seconds(done) == 330  # three more at the 110 s the first took
    after = [(now, m) for now, m in messages if now > 110.0]
    assert not [m for _, m in after if ", not " in m]  # the speed is learned: no more surprises
    ends = [now + e for now, m in after if (e := eta_seconds(m)) is not None]
    assert ends == sorted(ends, reverse=True) and ends[0] == pytest.approx(440.0)


def test_the_eta_never_goes_up_without_a_reason() -> None:
    """Units that end in another order than planned and at uneven times: every rise of the
    promised end comes with the name of a unit past its estimate."""
    units = [sm90("big", 16)] + [sm90(f"u{i}") for i in range(5)]
    tracker = BuildProgress(units, jobs=2, cores=2, started=0.0)
    finishes = [(70.0, "u1"), (150.0, "u0"), (260.0, "u2"), (300.0, "big"), (330.0, "u3"), (420.0, "u4")]
    last_end = None
    for now, message in run(tracker, finishes):
        if (eta := eta_seconds(message)) is None:
            continue
        if last_end is not None and now + eta > last_end + 1:
            assert re.search(r", not \S+: \S+ (has run|took) \S+ of an estimated \S+", message), message
        last_end = now + eta


def test_a_heartbeat_at_a_steady_interval() -> None:
    tracker = BuildProgress([sm90("a"), sm90("b")], jobs=1, cores=4, started=100.0, heartbeat_s=20.0)
    assert tracker.next_heartbeat() == 120.0 and not tracker.heartbeat_due(119.0)
    assert tracker.heartbeat_due(120.0)
    assert tracker.heartbeat(120.0) == "1 compiling, 0 of 2 done, 20s elapsed, ETA 90s"
    tracker.finished("a", 130.0)  # a unit's line counts as a sign of life too
    assert tracker.next_heartbeat() == 150.0
    assert tracker.heartbeat(150.0).startswith("1 compiling, 1 of 2 done, 50s elapsed, ETA ")


def test_without_estimates_the_eta_comes_from_the_units_done() -> None:
    tracker = BuildProgress([UnitEstimate("a"), UnitEstimate("b"), UnitEstimate("c")], 1, 1, 0.0)
    assert tracker.start_message() == "compiling 3 translation unit(s), 1 at a time"
    assert "ETA" not in tracker.heartbeat(30.0)
    assert tracker.finished("a", 40.0) == "[1/3] a (40s elapsed, ETA 80s)"


def test_the_build_cache_beats_while_a_compile_runs(tmp_path: Path) -> None:
    """Through ninja with a stand-in compiler of 1 s per unit, heartbeats every 0.2 s: every
    message is one line, the heartbeats say what runs, each unit's line comes once."""
    compiler = tmp_path / "nvcc.py"
    compiler.write_text(
        "import pathlib, sys, time\ntime.sleep(1)\npathlib.Path(sys.argv[2]).write_text('x')\n"
    )
    specs = [
        BuildSpec(f"{name}\n", (sys.executable, str(compiler), "{src}", "{out}"), "s", 1, name, (), 1.0, 1.0)
        for name in ("first", "second")
    ]
    messages: list[str] = []
    BuildCache(tmp_path / "cache", messages.append, heartbeat_s=0.2).build(specs, jobs=1, claim=2, cores=1)
    assert messages[0] == "compiling 2 translation unit(s), 1 at a time, about 2s by the cost model"
    beats = [m for m in messages if m.startswith("1 compiling, ")]
    assert len(beats) >= 4, messages
    assert [m.split(" (")[0] for m in messages if m.startswith("[")] == ["[1/2] first", "[2/2] second"]
    assert not [m for m in messages if "\n" in m]


@pytest.mark.parametrize("verbosity", [(), ("-q",), ("-v",)])
def test_progress_lines_stand_alone_in_the_terminal(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, verbosity: tuple[str, ...]
) -> None:
    """Through pytest's terminal writer: each progress line on a line of its own, none blank
    between them, and the results after them."""
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / "fi-data")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    monkeypatch.setenv("STAND_IN_HOST", "1")
    monkeypatch.setenv("STAND_IN_SECONDS", "0.6")
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.25)
    (pytester.path / "m.yaml").write_text(MATRIX)
    (pytester.path / "stand_in_nvcc.py").write_text(STAND_IN_NVCC)
    pytester.makeconftest(STAND_IN_CONFTEST)
    args = ("--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-build-jobs", "1", *verbosity)
    result = pytester.runpytest(*args, *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    lines = result.outlines
    shown = [
        i for i, line in enumerate(lines) if line.startswith("tileconform: ") and "build cache" not in line
    ]
    shown = [i for i in shown if not lines[i].startswith("tileconform: FlashInfer")]
    assert lines[shown[0]].startswith("tileconform: compiling ")
    assert any(" compiling, 0 of " in lines[i] for i in shown), lines  # a heartbeat
    assert shown == list(range(shown[0], shown[-1] + 1)), lines  # together, nothing blank between
    assert not [line for line in lines if "tileconform: " in line and not line.startswith("tileconform: ")]
    after = lines[shown[-1] + 1]
    assert after.strip(), lines  # the results follow at once
    assert result.parseoutcomes() == {"unrun": 3}  # compile only: the kernel never ran


def test_a_cached_build_says_nothing_and_a_wait_says_so(tmp_path: Path) -> None:
    """Found in the cache: no message at all. Locked by another process: one line saying what
    it waits for, so the wait does not look like a hang."""
    compiler = tmp_path / "nvcc.py"
    compiler.write_text("import pathlib, sys\npathlib.Path(sys.argv[2]).write_text('x')\n")
    spec = BuildSpec("a\n", (sys.executable, str(compiler), "{src}", "{out}"), "s", 1, "a")
    BuildCache(tmp_path / "cache").build([spec], jobs=1)
    messages: list[str] = []
    BuildCache(tmp_path / "cache", messages.append).build([spec], jobs=1)
    assert messages == []
    other = BuildSpec("b\n", spec.command, "s", 1, "b")
    cache = BuildCache(tmp_path / "cache", messages.append)
    lock = cache._lock(other)
    lock.acquire()
    waiter = threading.Thread(target=cache.build, args=([other], 1))
    waiter.start()
    time.sleep(0.5)
    lock.release()
    waiter.join()
    assert messages[0] == "waiting for 1 translation unit(s) another process is compiling"


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def slow_third_case(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """A project of three cases built by the stand-in compiler, whose third (256x128x64) keeps
    compiling for ten minutes; the arguments of a compile-only run, and the file the stand-in
    counts its compiles in (one line per compile: how many cases its unit holds)."""
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / "fi-data")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    monkeypatch.setenv("STAND_IN_HOST", "1")
    (pytester.path / "m.yaml").write_text(MATRIX)
    (pytester.path / "stand_in_nvcc.py").write_text(STAND_IN_NVCC)
    pytester.makeconftest(STAND_IN_CONFTEST)
    args = ["--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-build-jobs", "2"]
    args += ["-p", "no:xdist", *QUIET]
    monkeypatch.setenv("STAND_IN_SLOW", "256x128x64")
    return args, pytester.path / "cache" / "compiles.log"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_keeps_the_units_it_compiled(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    """Ctrl-C, or SIGTERM (a CI job's timeout or cancel), while one unit still compiles: the
    compiles stop and their work folder goes; the next run compiles only the unfinished case,
    the cases of the unit that was done coming from the cache, though the next run plans other
    units (one case each)."""
    args, compiles = slow_third_case(pytester, monkeypatch)
    first = [sys.executable, "-m", "pytest", *args, "--tile-build-group", "2"]  # units [1, 2], [3]
    # the signals as a terminal or a CI runner delivers them, even where this test runs with them
    # ignored (a shell's background job): Python keeps an ignored signal ignored
    run = pytester.popen(first, stdin=subprocess.DEVNULL, preexec_fn=_default_signals)
    deadline = time.monotonic() + 60
    while not (compiles.exists() and len(compiles.read_text().splitlines()) == 2):
        assert time.monotonic() < deadline and run.poll() is None, "the two compiles did not start"
        time.sleep(0.1)
    while not list((pytester.path / "cache").glob(".build-*/*/harness")):  # the quick unit's output
        assert time.monotonic() < deadline and run.poll() is None, "the quick unit did not end"
        time.sleep(0.1)
    time.sleep(1)  # ninja sees it end
    run.send_signal(signum)
    assert run.wait(timeout=240) != 0  # well before the slow compile would end (600 s)
    assert not list((pytester.path / "cache").glob(".build-*"))  # the work folder is gone
    monkeypatch.delenv("STAND_IN_SLOW")
    result = pytester.runpytest(*args, "--tile-build-group", "1")
    assert result.parseoutcomes() == {"unrun": 3}, result.stdout.str()
    assert compiles.read_text().splitlines()[2:] == ["1"]  # the interrupted case alone


def test_a_build_time_limit_judges_what_was_built(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--tile-build-limit: the unit still compiling when it passes is stopped and its case
    skipped, saying why; the cases of the unit that was done are judged; the rerun compiles
    only the skipped case."""
    args, compiles = slow_third_case(pytester, monkeypatch)
    limited = pytester.runpytest_subprocess(
        *args, "--tile-build-group", "2", "--tile-build-limit", "30", "-rs"
    )
    assert limited.parseoutcomes() == {"unrun": 2, "skipped": 1}, limited.stdout.str()
    why = "not built: the build time limit (--tile-build-limit 30 s) passed before its translation unit"
    limited.stdout.fnmatch_lines(
        ["arch  dtypes  128x64x64  128x128x64  256x128x64", "sm90  bf16    1u *1u *1s*"]
    )
    limited.stdout.fnmatch_lines([f"SKIPPED*{why}*"])
    assert (
        "the build's time limit passed: 1 finished translation unit(s) cached, 1 not" in limited.stdout.str()
    )
    assert not list((pytester.path / "cache").glob(".build-*"))
    monkeypatch.delenv("STAND_IN_SLOW")
    rerun = pytester.runpytest(*args, "--tile-build-group", "1")
    assert rerun.parseoutcomes() == {"unrun": 3}, rerun.stdout.str()
    assert compiles.read_text().splitlines()[2:] == ["1"]  # the skipped case alone


def test_a_build_time_limit_must_be_positive(pytester: pytest.Pytester) -> None:
    (pytester.path / "m.yaml").write_text(MATRIX)
    result = pytester.runpytest("--tile-matrix", "m.yaml", "--tile-build-limit", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tile-build-limit 0.0: must be a finite number of seconds above 0*"])
