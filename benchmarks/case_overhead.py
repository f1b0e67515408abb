"""Per-case overhead of hardware runs, from the plugin's run reports (``--tile-report``).

Overhead of a case = its duration (pytest's call phase) minus the kernel's own time: kernel_ms
(CUDA events, the mean of ``--tile-timing-iters N`` launcher calls) times the case's kernel runs
(the verdict's ``launches``: the checked run, each graph replay and repeat, the N timed calls;
one where a report predates it). Where the rest goes, per case, is the verdict's ``seconds``:
inputs (torch makes and writes them), harness (the runner: load inputs, launcher, kernel, D),
check (read D, torch reference, compare: check_read, check_reference, check_compare); gc is
the garbage collector's time within those. ``slow_checks`` sets the cases whose check took over
3x the median against the rest.

    python benchmarks/case_overhead.py REPORT.json [...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def summarize(reports: list[dict[str, Any]]) -> dict[str, Any]:
    cases = [c for r in reports for c in r["cases"] if c.get("verdict")]
    overheads: list[float] = []
    parts: dict[str, list[float]] = {}
    for case in cases:
        extra = case["verdict"].get("extra", {})
        kernel_s = (extra.get("kernel_ms") or 0.0) * extra.get("launches", 1) / 1000
        overheads.append(case["duration_s"] - kernel_s)
        for name, seconds in extra.get("seconds", {}).items():
            parts.setdefault(name, []).append(seconds)
    wall = max((c.get("finished_at_s") or 0.0) for c in cases) if cases else 0.0

    def spread(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "median_ms": round(1000 * statistics.median(ordered), 2),
            "p90_ms": round(1000 * ordered[int(0.9 * (len(ordered) - 1))], 2),
            "max_ms": round(1000 * ordered[-1], 2),
        }

    kernel_ms = [c["verdict"]["extra"].get("kernel_ms") for c in cases]
    timed = [k for k in kernel_ms if k is not None]
    return {
        "cases": len(cases),
        "outcomes": {o: sum(c["outcome"] == o for c in cases) for o in sorted({c["outcome"] for c in cases})},
        "last_case_finished_s": round(wall, 2),
        "sum_of_case_durations_s": round(sum(c["duration_s"] for c in cases), 2),
        "kernel_ms": spread([k / 1000 for k in timed]) if timed else None,
        "overhead": spread(overheads) if overheads else None,
        "overhead_mean_ms": round(1000 * statistics.fmean(overheads), 2) if overheads else None,
        "parts": {name: spread(values) for name, values in sorted(parts.items())},
        "slow_checks": slow_checks(cases),
    }


def slow_checks(cases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cases whose check took over 3x the median against the rest: the mean of each part
    of their time (ms) and of what happened to the process meanwhile (page faults, involuntary
    context switches), where the reports have them."""
    extras = [
        c["verdict"]["extra"] for c in cases if "check" in c["verdict"].get("extra", {}).get("seconds", {})
    ]
    if not extras:
        return None
    threshold = 3 * statistics.median(e["seconds"]["check"] for e in extras)

    def means(group: list[dict[str, Any]]) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for extra in group:
            for name, seconds in extra["seconds"].items():
                values.setdefault(f"{name}_ms", []).append(1000 * seconds)
            for name, count in extra.get("check_usage", {}).items():
                values.setdefault(name, []).append(count)
        return {name: round(statistics.fmean(v), 2) for name, v in sorted(values.items())}

    slow = [e for e in extras if e["seconds"]["check"] > threshold]
    rest = [e for e in extras if e["seconds"]["check"] <= threshold]
    return {
        "threshold_ms": round(1000 * threshold, 2),
        "count": len(slow),
        "slow": means(slow) if slow else None,
        "rest": means(rest) if rest else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    summary = summarize([json.loads(p.read_text()) for p in args.reports])
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
