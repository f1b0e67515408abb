"""The sanitize stage's process (flashinfer/sanitizer.py) with a stand-in compute-sanitizer: a
script that writes the report a real one writes, exits as it exits and runs the harness command
it was given (here a stand-in that writes the harness's verdict)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.sanitizer import ERROR_EXIT, REPORT, find_sanitizer, sanitize

#: $1.. are compute-sanitizer's arguments: --tool MODE --error-exitcode N --log-file LOG RUNNER UNIT DIR CASE
STAND_IN = """#!/bin/sh
log=$6; dir=$9
printf '%s\\n' "$@" > "$dir/args"
"$7" "$8" "$dir" "${10}"
echo "========= {summary}" > "$log"
exit {status}
"""
#: the runner's one-case mode: writes the verdict it is told to (UNIT's name) into DIR
RUNNER = """#!/bin/sh
printf '{"final": true, "stage": "%s", "status": "x", "message": "m"}' "$(basename "$1")" > "$2/verdict.json"
"""


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "tileconform-run-x"
    run.mkdir()
    (run / "problem.txt").write_text(
        "experts 2\nrows 1 2\nn 8\nk 8\ngraph_replays 8\nrepeats 3\ntiming_iters 5\n"
    )
    for name in ("a.bin", "b.bin", "d.bin", "d.graph.bin"):
        (run / name).write_bytes(b"\0" * 8)
    return run


@pytest.mark.parametrize(
    ("summary", "status", "verdict", "result", "errors"),
    [
        ("ERROR SUMMARY: 0 errors", 0, "pass", "clean", 0),
        ("ERROR SUMMARY: 3 errors", ERROR_EXIT, "pass", "errors", 3),
        ("RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)", ERROR_EXIT, "pass", "errors", 1),
        ("ERROR SUMMARY: 0 errors", 0, "run", "failed", 0),
    ],
)
def test_what_the_sanitizer_said_becomes_the_stages_result(
    tmp_path: Path, run_dir: Path, summary: str, status: int, verdict: str, result: str, errors: int
) -> None:
    tool = _script(
        tmp_path / "compute-sanitizer",
        STAND_IN.replace("{summary}", summary).replace("{status}", str(status)),
    )
    runner = _script(tmp_path / "runner", RUNNER)
    run = sanitize(tool, "memcheck", runner, tmp_path / verdict, run_dir, "case0", 30)
    assert (run.result, run.errors, run.failed_stage) == (result, errors, result != "clean")
    target = run_dir.parent / "tileconform-run-x-memcheck"
    assert run.report == str(target / REPORT) and Path(run.report).read_text().startswith("=========")
    args = (target / "args").read_text().splitlines()
    assert args[:6] == ["--tool", "memcheck", "--error-exitcode", str(ERROR_EXIT), "--log-file", run.report]
    assert args[6:] == [str(runner), str(tmp_path / verdict), str(target), "case0"]
    # the report stays next to the sanitized run's verdict; the inputs are gone
    assert json.loads((target / "verdict.json").read_text())["stage"] == verdict
    assert not list(target.glob("*.bin"))


def test_the_sanitized_run_leaves_out_the_repeating_stages(tmp_path: Path, run_dir: Path) -> None:
    tool = _script(tmp_path / "compute-sanitizer", STAND_IN.replace("{summary}", "").replace("{status}", "0"))
    runner = _script(tmp_path / "runner", 'cp "$2/problem.txt" "$2/seen.txt"\n' + RUNNER)
    for mode, poison in (("racecheck", []), ("initcheck", ["poison 0"])):
        sanitize(tool, mode, runner, tmp_path / "pass", run_dir, "case0", 30)
        seen = (run_dir.parent / f"tileconform-run-x-{mode}" / "seen.txt").read_text().splitlines()
        assert seen == ["experts 2", "rows 1 2", "n 8", "k 8", *poison]


def test_a_sanitizer_that_hangs_fails_the_stage(tmp_path: Path, run_dir: Path) -> None:
    tool = _script(tmp_path / "compute-sanitizer", "#!/bin/sh\nsleep 30\n")
    run = sanitize(tool, "synccheck", tmp_path / "runner", tmp_path / "pass", run_dir, "case0", 0.5)
    assert (run.result, run.summary) == ("failed", "timeout after 0.5s")


def test_without_compute_sanitizer_the_stage_is_not_judged(
    tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_sanitizer(None) is None and find_sanitizer(tmp_path) is None
    run = sanitize(None, "memcheck", tmp_path / "runner", tmp_path / "unit", run_dir, "case0", 30)
    assert (run.result, run.failed_stage) == ("unavailable", False)
    assert (
        "no compute-sanitizer" in run.summary and not (run_dir.parent / "tileconform-run-x-memcheck").exists()
    )
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    found = _script(toolkit / "bin" / "compute-sanitizer", "#!/bin/sh\n")
    assert find_sanitizer(toolkit) == found
    os.chmod(found, 0o644)
    assert find_sanitizer(toolkit) is None
