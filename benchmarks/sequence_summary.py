"""What a run through the sequence stage (``--tile-sequence N``) shows, from its reports
(``--tile-report``): one line per check, OK or BAD, then every case that did not pass, then where
the time went.

Checks: the report holds the cases asked for; every case passed, through ``sequence``, with its
5 N sequence runs (N alone, N GEMM 1 -> GEMM 2 pairs, N graph replays of one pair; a pair counts
two); every case whose D changed from run to run still passed (its epilogue reduces rows in an
order the schedule decides and the D that changed most was within the reference; a D that must
not change fails its case).

Time: the harness's seconds per case by problem (median, max, sum) and,
where the cases were timed (``--tile-timing-iters``), what the harness spent beside the kernel's
own runs: ``seconds.harness - kernel_ms x launches``, the cost of the stages' resets, comparisons
and launches (the GEMM 2 of a pair is counted at GEMM 1's time, so a pair whose GEMM 2 is
slower shows that difference too).

    python benchmarks/sequence_summary.py DIR NAME:N:CASES [...]   # DIR/seq-NAME.json[.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

#: sequence runs per N: the case alone, GEMM 1 and GEMM 2 of each pair, both again per graph replay
RUNS_PER_N = 5
#: cases that did not pass listed one by one; the rest are counted
SHOWN = 40


def read(folder: Path, name: str) -> dict[str, Any] | None:
    """The report ``seq-NAME.json`` (or its .gz) in ``folder``; None when there is none or it is
    not JSON (a run killed before it wrote one)."""
    for path in (folder / f"seq-{name}.json", folder / f"seq-{name}.json.gz"):
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            report: dict[str, Any] = json.loads(raw)
            return report
        except (OSError, ValueError):
            continue
    return None


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    median = statistics.median(ordered)
    return f"median {median:.3f} s, p90 {p90:.3f} s, max {ordered[-1]:.3f} s, sum {sum(ordered):.1f} s"


def ok(good: bool) -> str:
    return "OK " if good else "BAD"


def summarize(report: dict[str, Any] | None, name: str, runs: int, expected: int) -> list[str]:
    """The lines for one report: checks, failures, time."""
    if report is None:
        return [f"BAD  {name}: no report"]
    cases = report.get("cases", [])
    lines = [f"{ok(len(cases) == expected)}  {name}: {len(cases)} of {expected} cases"]
    verdicts = [(c, c.get("verdict") or {}) for c in cases]
    outcomes = Counter(str(v.get("outcome", c.get("outcome"))) for c, v in verdicts)
    through = Counter(str(v.get("judged_through")) for _, v in verdicts)
    lines.append(f"{'OK ' if set(outcomes) <= {'pass'} else 'BAD'}  {name}: outcomes {dict(outcomes)}")
    lines.append(
        f"{'OK ' if set(through) <= {'sequence'} else 'BAD'}  {name}: judged through {dict(through)}"
    )
    sequences = [v.get("extra", {}).get("sequence") for _, v in verdicts]
    done = [s for s in sequences if isinstance(s, dict)]
    total = sum(int(s.get("runs", 0)) for s in done)
    changed = sum(int(s.get("changed_runs", 0)) for s in done)
    full = sum(1 for s in done if s.get("runs") == RUNS_PER_N * runs)
    moved = [v for _, v in verdicts if (v.get("extra", {}).get("sequence") or {}).get("changed_runs")]
    lines.append(
        f"{ok(full == len(cases))}  {name}: {full} cases with {RUNS_PER_N * runs:,} sequence runs; "
        f"{total:,} runs in all; pairs {dict(Counter(str(s.get('pair')) for s in done))}"
    )
    passed = sum(
        v.get("outcome") == "pass" for v in moved
    )  # a reducing epilogue's order, within the reference
    lines.append(
        f"{ok(passed == len(moved))}  {name}: {changed} runs changed D, in {len(moved)} cases, "
        f"{passed} of them passed (within the reference)"
    )
    unpassed = [(case, verdict) for case, verdict in verdicts if verdict.get("outcome") != "pass"]
    for case, verdict in unpassed[:SHOWN]:
        why = str(verdict.get("detail") or case.get("skip_reason") or "")[:240]
        outcome = verdict.get("outcome", case.get("outcome"))
        lines.append(f"  not pass: {case.get('id')}: {outcome} ({verdict.get('status')}): {why}")
    if len(unpassed) > SHOWN:
        lines.append(f"  not pass: {len(unpassed) - SHOWN} more (the report has them all)")
    by_problem: dict[str, list[float]] = {}
    beside: dict[str, list[float]] = {}
    for _, verdict in verdicts:
        extra = verdict.get("extra", {})
        harness = (extra.get("seconds") or {}).get("harness")
        if harness is None:
            continue
        problem = str(extra.get("problem"))
        by_problem.setdefault(problem, []).append(harness)
        if extra.get("kernel_ms"):
            beside.setdefault(problem, []).append(
                harness - extra["kernel_ms"] * extra.get("launches", 1) / 1000
            )
    finished = max((c.get("finished_at_s") or 0.0 for c in cases), default=0.0)
    lines.append(f"     {name}: startup {report.get('startup_s')} s, last case finished at {finished:.1f} s")
    for problem, values in sorted(by_problem.items()):
        lines.append(f"     {name} harness, {problem} ({len(values)} cases): {_spread(values)}")
    for problem, values in sorted(beside.items()):
        lines.append(f"     {name} beside the kernel runs, {problem}: {_spread(values)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("reports", nargs="+", help="NAME:N:CASES for DIR/seq-NAME.json[.gz]")
    args = parser.parse_args(argv)
    for spec in args.reports:
        name, runs, expected = spec.split(":")
        print("\n".join(summarize(read(args.folder, name), name, int(runs), int(expected))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
