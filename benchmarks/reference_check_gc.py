"""Slowest reference checks without ``gc.freeze``, with it once, and with it before every case
(after a young collection, as the backend does) (CPU only, no build needed).

Makes the inputs and the torch reference of every case of a matrix, in a process that holds
what a pytest worker holds (torch, the plugin, the matrix, a growing list of long-lived
reports), and prints the median / p90 / p99 / max of one case. Without freezing, Python's full
collections walk every long-lived object and land on random cases; frozen once, they still walk
what the cases add. The full collections' count and total time are printed too.

    python benchmarks/reference_check_gc.py plain|freeze|each [MATRIX]
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import pytest  # noqa: F401  (held by a real worker)
import torch  # noqa: F401

from pytest_tileconform.core.gctime import CollectorTime, freeze_survivors
from pytest_tileconform.flashinfer.axes import KINDS, moe_cases
from pytest_tileconform.flashinfer.numerics.reference import expected_output, make_inputs
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.matrix.load import load_matrix


def main() -> None:
    mode = sys.argv[1]
    cases = moe_cases(
        load_matrix(Path(sys.argv[2] if len(sys.argv) > 2 else "matrices/sm90.yaml"), KINDS).cases
    )
    items = [[object() for _ in range(50)] for _ in range(4000)]  # stand-in for pytest's items
    full = CollectorTime(generation=2)
    full.install()
    if mode in ("freeze", "each"):
        gc.freeze()
    reports = []
    seconds = []
    for i, case in enumerate(cases):
        if mode == "each":
            freeze_survivors()
        started = time.perf_counter()
        inputs = make_inputs(case, 0)
        expected = expected_output(inputs, case)
        compare(expected.value.to(expected.out_dtype), expected)
        reports.append([{"case": i, "values": list(range(20))} for _ in range(200)])
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    ms = [1000 * seconds[int(q * (len(seconds) - 1))] for q in (0.5, 0.9, 0.99, 1.0)]
    print(
        f"{mode}: median {ms[0]:.1f} ms, p90 {ms[1]:.1f} ms, p99 {ms[2]:.1f} ms, max {ms[3]:.1f} ms; "
        f"{full.collections} full collections, {1000 * full.seconds:.0f} ms in all"
    )
    del items, reports


if __name__ == "__main__":
    main()
