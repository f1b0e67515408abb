"""Write a -k expression naming the cases of a matrix that no results file has judged yet, for a
matrix judged in pieces across device sessions (``benchmarks/run.py --routine record-slice -k @FILE``).

    python3 scripts/unjudged-slice.py MATRIX OUT.k [--cell DTYPES:CLUSTER ...] [--max N]
        [--round UNITS:GROUP] REPORT...

A case counts as judged when a report holds a verdict for its id from the same kind of source
(--source, default "hardware"). --cell keeps the cases of one dtype combination and cluster, as
ids spell them (``fp8_e4m3xint4-bf16:c2x1x1``); the ids keep the matrix's order. --round keeps
what one round of UNITS parallel compiles of units of at most GROUP builds (``16:5`` for the GPU
host with --tile-build-group 5): a unit holds one dtype combination (flashinfer/planner.py), so each
combination takes ceil(cases / GROUP) units.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from pytest_tileconform.flashinfer.planner import dtypes
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.results.store import read_results


def judged_ids(reports: list[Path], source: str) -> set[str]:
    ids: set[str] = set()
    for path in reports:
        for record in read_results(path).cases:
            if record.verdict is not None and record.verdict.source.startswith(source):
                ids.add(record.id)
    return ids


def cell(case_id: str) -> str:
    """``sm90-DTYPES-OUT-TILE-CLUSTER-...`` -> ``DTYPES-OUT:CLUSTER``."""
    parts = case_id.split("-")
    return f"{parts[1]}-{parts[2]}:{parts[4]}"


def one_round(cases: list[Case], units: int, group: int) -> list[Case]:
    """The first of ``cases`` that fit in ``units`` units of at most ``group`` cases of one
    dtype combination each."""
    taken: Counter[tuple[str, str, str]] = Counter()
    kept = []
    for case in cases:
        family = dtypes(case)
        taken[family] += 1
        if sum(-(-n // group) for n in taken.values()) > units:
            taken[family] -= 1
            continue
        kept.append(case)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("reports", type=Path, nargs="*")
    parser.add_argument("--cell", action="append", default=[])
    parser.add_argument("--max", type=int, default=0, help="at most N cases (0: all)")
    parser.add_argument("--source", default="hardware")
    parser.add_argument("--round", default=None, metavar="UNITS:GROUP")
    args = parser.parse_intermixed_args(argv)
    done = judged_ids(args.reports, args.source)
    cases = [
        case
        for case in load_matrix(args.matrix).cases
        if case.id not in done and (not args.cell or cell(case.id) in args.cell)
    ]
    if args.round:
        units, _, group = args.round.partition(":")
        if not (units.isdigit() and group.isdigit() and int(units) > 0 and int(group) > 0):
            parser.error(f"--round {args.round}: expected UNITS:GROUP, two whole numbers above 0")
        cases = one_round(cases, int(units), int(group))
    ids = [case.id for case in cases]
    if args.max:
        ids = ids[: args.max]
    if not ids:
        print("no unjudged case in that selection", file=sys.stderr)
        return 1
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(" or ".join(ids) + "\n")
    tmp.replace(args.out)
    print(f"{len(ids)} unjudged case(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
