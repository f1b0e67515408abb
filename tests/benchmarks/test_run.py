"""benchmarks/run.py, the one benchmark driver: its routines are the ones the project measures,
and each run's report, log, exit status and time land in the output folder's summary."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def run(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("run")


def test_the_routines(run: ModuleType) -> None:
    assert run.ROUTINES == (
        "first-verdict",
        "cold",
        "warm",
        "overhead",
        "speedup",
        "virtual-compare",
        "record-slice",
    )
    assert set(run.RUN) == set(run.ROUTINES)
    args = run.parse(["--routine", "cold", "warm", "-k", "bf16", "--", "--tile-build-jobs", "1"])
    assert (args.routine, args.select, args.pytest_args) == (
        ["cold", "warm"],
        "bf16",
        ["--tile-build-jobs", "1"],
    )
    with pytest.raises(SystemExit):
        run.parse(["--routine", "lunch"])


def test_a_run_leaves_its_report_log_and_summary(run: ModuleType, tmp_path: Path) -> None:
    bench = run.Bench(run.parse(["--routine", "cold", "--out", str(tmp_path), "--name", "t"]))
    report = tmp_path / "t-x.json"
    entry = bench.command(
        "x",
        [sys.executable, "-c", f"open({str(report)!r}, 'w').write('{{}}'); print('ran'); exit(3)"],
        report=report,
    )
    assert (entry["exit"], entry["report"]) == (3, "t-x.json.gz")
    assert not report.exists() and (tmp_path / "t-x.json.gz").is_file()
    assert (tmp_path / "t-x.log").read_text() == "ran\n"
    summary = json.loads(bench.summary().read_text())
    assert [r["run"] for r in summary["runs"]] == ["x"] and "cores" in summary["machine"]
