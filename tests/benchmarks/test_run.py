"""benchmarks/run.py, the one benchmark driver: its routines are the ones the project measures,
and each run's report, log, exit status and time land in the output folder's summary."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, FAKE_CONFTEST
from helpers.paths import REPO

from pytest_tileconform.results.store import read_results


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


def test_cold_then_warm_through_the_plugin(pytester: pytest.Pytester, run: ModuleType) -> None:
    """The driver runs pytest as a user does (here over the fake backend's matrix): two runs on one
    cache, each leaving its gzipped report, log and a summary row."""
    pytester.makeconftest(FAKE_CONFTEST)
    pytester.path.joinpath("m.yaml").write_text(BASIC)
    out = pytester.path / "out"
    command = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--routine", "cold", "warm"]
    command += ["--matrix", "m.yaml", "--device", "virtual", "--out", str(out), "--name", "t"]
    done = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads((out / "t-summary.json").read_text())["runs"]
    assert [(r["run"], r["exit"], r["report"]) for r in runs] == [
        ("cold", 0, "t-cold.json.gz"),
        ("warm", 0, "t-warm.json.gz"),
    ]
    cases = read_results(out / "t-warm.json.gz").cases
    assert sorted(case.id for case in cases) == sorted(BASIC_IDS)
