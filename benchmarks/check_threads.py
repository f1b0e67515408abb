"""How long a case's reference check (torch reference, then compare) takes with 1, 2, 4, ...
threads, for the sm90 matrix's problem and for larger ones (CPU only, no build needed).

The backend gives torch one thread per ``MACS_PER_THREAD`` multiply-adds of a case's
reference product, at most the worker's share of the cores (``case_threads``): with one per
core, small checks stalled on preempted threads, and large ones need the cores. This measures
both sides: per problem and thread count, the median and slowest check (checks until
``--seconds`` have passed, at least 3), as JSON. The actual D is the reference rounded to the
output dtype, so the compare does its whole work.

    python benchmarks/check_threads.py [--threads 1 2 4 8 16] [--seconds 2] [--problems N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from pytest_tileconform.compile.cache import available_cores
from pytest_tileconform.flashinfer.axes import KINDS, moe_cases
from pytest_tileconform.flashinfer.numerics.reference import expected_output, make_inputs, output_dtype
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.matrix.load import load_matrix

#: The sm90 matrix's own problem, then MoE layers of growing size (8 experts, N and K of
#: common expert FFNs).
PROBLEMS = {
    "sm90 matrix (378 x 384 x 512)": Problem(rows=(0, 1, 77, 300), n=384, k=512),
    "8 x 128 rows, 1024 x 1024": Problem(rows=(128,) * 8, n=1024, k=1024),
    "8 x 256 rows, 2048 x 2048": Problem(rows=(256,) * 8, n=2048, k=2048),
    "8 x 512 rows, 4096 x 7168": Problem(rows=(512,) * 8, n=4096, k=7168),
}


def time_checks(problem: Problem, threads: list[int], budget_s: float, matrix: Path) -> list[dict[str, Any]]:
    """Each thread count: checks until ``budget_s`` have passed, at least 3."""
    [first, *_] = moe_cases(load_matrix(matrix, KINDS).cases)
    case = replace(first, axes=replace(first.axes, problem=problem, fusion="none"))
    inputs = make_inputs(case, seed=0)
    actual = expected_output(inputs, case).value.to(output_dtype(case.out))
    results = []
    for count in threads:
        torch.set_num_threads(count)
        seconds: list[float] = []
        while len(seconds) < 3 or sum(seconds) < budget_s:
            start = time.perf_counter()
            expected = expected_output(inputs, case)
            assert compare(actual, expected).ok
            seconds.append(time.perf_counter() - start)
        results.append(
            {
                "threads": count,
                "checks": len(seconds),
                "median_ms": round(1000 * statistics.median(seconds), 2),
                "max_ms": round(1000 * max(seconds), 2),
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=2.0, help="checking time per point")
    parser.add_argument("--matrix", type=Path, default=Path("matrices/sm90.yaml"))
    parser.add_argument("--problems", type=int, default=len(PROBLEMS), help="the first N problems")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {
        name: time_checks(problem, args.threads, args.seconds, args.matrix)
        for name, problem in list(PROBLEMS.items())[: args.problems]
    }
    text = json.dumps({"cores": available_cores(), "results": results}, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
