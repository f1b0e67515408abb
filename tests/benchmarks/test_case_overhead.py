"""benchmarks/case_overhead.py: per-case overhead and where the slow checks' time goes."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def case_overhead(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("case_overhead")


def case(duration_s: float, check_s: float, faults: int) -> dict[str, Any]:
    seconds = {"inputs": 0.010, "harness": 0.008, "check": check_s, "gc": 0.0}
    usage = {"minor_faults": faults, "major_faults": 0, "involuntary_switches": 0}
    extra = {"kernel_ms": 0.01, "seconds": seconds, "check_usage": usage}
    return {"outcome": "passed", "duration_s": duration_s, "finished_at_s": 1.0, "verdict": {"extra": extra}}


def test_slow_checks_are_set_against_the_rest(case_overhead: ModuleType) -> None:
    cases = [case(0.025, 0.005, 10) for _ in range(9)] + [case(0.070, 0.050, 400)]
    summary = case_overhead.summarize([{"cases": cases}])
    assert summary["cases"] == 10
    assert summary["overhead"]["median_ms"] == pytest.approx(24.99)
    slow = summary["slow_checks"]
    assert slow["count"] == 1 and slow["threshold_ms"] == pytest.approx(15.0)
    assert slow["slow"]["check_ms"] == pytest.approx(50.0) and slow["slow"]["minor_faults"] == 400
    assert slow["rest"]["check_ms"] == pytest.approx(5.0) and slow["rest"]["minor_faults"] == 10


def test_reports_without_checks(case_overhead: ModuleType) -> None:
    plain = {"outcome": "passed", "duration_s": 0.02, "finished_at_s": 1.0, "verdict": {"extra": {}}}
    assert case_overhead.summarize([{"cases": [plain]}])["slow_checks"] is None
