"""benchmarks/sequence_summary.py: what a run through the sequence stage shows, OK or BAD."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def sequence_summary(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("sequence_summary")


def case(outcome: str, runs: int, changed: int = 0, kernel_ms: float | None = None) -> dict[str, Any]:
    sequence = {
        "runs": runs,
        "changed_runs": changed,
        "most_changed_elements": 7 * changed,
        "pair": "none -> finalize",
    }
    extra = {"problem": "edges", "sequence": sequence, "seconds": {"harness": 0.5}, "launches": 5 + runs}
    if kernel_ms is not None:
        extra["kernel_ms"] = kernel_ms
    verdict = {
        "outcome": outcome,
        "judged_through": "sequence",
        "status": "changed",
        "detail": "D",
        "extra": extra,
    }
    return {"id": f"c{len(str(runs))}", "finished_at_s": 2.0, "verdict": verdict}


def test_a_clean_run_is_ok_and_says_what_the_harness_spent_beside_the_kernel(
    sequence_summary: ModuleType, tmp_path: Path
) -> None:
    report = {"startup_s": 1.0, "cases": [case("pass", 50, kernel_ms=4.0), case("pass", 50, kernel_ms=4.0)]}
    (tmp_path / "seq-warm.json.gz").write_bytes(gzip.compress(json.dumps(report).encode()))
    lines = sequence_summary.summarize(sequence_summary.read(tmp_path, "warm"), "warm", 10, 2)
    assert [line[:3] for line in lines[:5]] == ["OK "] * 5
    assert "100 runs in all" in lines[3] and "0 runs changed D, in 0 cases, 0 of them passed" in lines[4]
    assert any("beside the kernel runs, edges" in line and "median 0.280 s" in line for line in lines)


def test_a_changed_d_a_short_run_and_missing_cases_are_bad(sequence_summary: ModuleType) -> None:
    short = case("pass", 5)
    short["verdict"]["judged_through"] = "repeat"  # the stage left out
    report = {"cases": [case("sequence", 50, changed=3), short]}
    lines = sequence_summary.summarize(report, "cold", 10, 3)
    assert [line[:3] for line in lines[:5]] == ["BAD"] * 5
    assert "3 runs changed D, in 1 cases, 0 of them passed" in lines[4]
    reducing = {"cases": [case("pass", 50, changed=3)]}  # a reducing epilogue's pass
    assert sequence_summary.summarize(reducing, "warm", 10, 1)[4].startswith("OK   warm: 3 runs changed D")
    assert any(line.startswith("  not pass: c2: sequence (changed)") for line in lines)
    assert sequence_summary.summarize(None, "gone", 10, 3) == ["BAD  gone: no report"]
