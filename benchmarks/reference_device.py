"""The reference on a GPU: the same expected D as on the CPU, and how long the parts of a case's
check take at real MoE sizes.

1. For every dtype combination the reference generates and both fusions (with a bias), inputs
   made on the CPU and moved to the device give bit for bit the expected D (value and bound) of
   the CPU reference.
2. For the named presets (default: dsv3 and mixtral prefill, both GEMMs), with bf16 and fp8
   inputs: seconds to make the inputs on the device, compute the expected D there and compare a
   correct D against it (the check's share of the per-case overhead, issue 17 item 7).

    python benchmarks/reference_device.py [--device cuda] [--preset NAME ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from pytest_tileconform.dtypes import dtype_label
from pytest_tileconform.flashinfer.axes import MoeAxes, MoeCase
from pytest_tileconform.flashinfer.numerics.reference import (
    GENERATED_BLOCK_SCALED,
    GENERATED_DTYPES,
    expected_output,
    make_inputs,
)
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.flashinfer.presets import presets_named
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.matrix.cases import Case

PRESETS = (
    "dsv3-gemm1-prefill16k",
    "dsv3-gemm2-prefill16k",
    "mixtral-gemm1-prefill4k",
    "mixtral-gemm2-prefill4k",
)


def case_of(act: str, weight: str, out: str, fusion: str, problem: Problem) -> MoeCase:
    return Case(
        matrix=Path("bench.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm90",
        act=act,
        weight=weight,
        out=out,
        dtype_label=dtype_label(act, weight, out),
        tile=(128, 128, 128),
        axes=MoeAxes(problem=problem, cluster=(1, 1, 1), swap_ab=False, fusion=fusion),
        expectation=None,
        suite=None,
    )


def same_on_device(device: str) -> list[str]:
    """Cases whose expected D differs between the CPU and ``device`` (should be none)."""
    pairs = [(t, t) for t in GENERATED_DTYPES] + list(GENERATED_BLOCK_SCALED)
    differ = []
    for (act, weight), out, fusion in (
        (p, o, f) for p in pairs for o in ("bf16", "fp16", "fp32") for f in ("none", "finalize")
    ):
        problem = Problem(rows=(37, 0, 64, 100, 5), n=256, k=2048, bias=fusion == "finalize")
        case = case_of(act, weight, out, fusion, problem)
        inputs = make_inputs(case, 0)
        cpu, there = expected_output(inputs, case), expected_output(inputs.to(device), case)
        same = torch.equal(cpu.value, there.value.cpu())
        if cpu.bound is not None and there.bound is not None:
            same = same and torch.equal(cpu.bound, there.bound.cpu())
        if not same:
            differ.append(f"{act}x{weight}->{out} {fusion}")
    return differ


def timed(device: str, name: str, act: str, out: str) -> dict[str, Any]:
    (preset,) = presets_named(name)
    fusion = "finalize" if preset.gemm == 2 else "none"
    problem = Problem(
        rows=preset.rows(0), n=preset.n, k=preset.k, tokens=preset.tokens, top_k=preset.model.top_k
    )
    case = case_of(act, act, out, fusion, problem)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    inputs = make_inputs(case, 0, device)
    sync()
    seconds["inputs"] = time.perf_counter() - start
    start = time.perf_counter()
    expected = expected_output(inputs, case)
    sync()
    seconds["reference"] = time.perf_counter() - start
    actual = expected.value.to(expected.out_dtype).cpu()  # D as read_output returns it
    start = time.perf_counter()
    report = compare(actual, expected)
    sync()
    seconds["compare"] = time.perf_counter() - start
    return {
        "preset": name,
        "act": act,
        "out": out,
        "ok": report.ok,
        "summary": report.summary(),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if device.startswith("cuda")
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    differ = same_on_device(args.device)
    verdict = "identical" if not differ else "DIFFERS: " + ", ".join(differ)
    print(f"expected D on {args.device} vs CPU: {verdict}")
    rows = []
    for name in args.preset or PRESETS:
        for act, out in (("bf16", "bf16"), ("fp8_e4m3", "bf16")):
            row = timed(args.device, name, act, out)
            rows.append(row)
            print(json.dumps(row))
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
    if args.json:
        args.json.write_text(
            json.dumps({"device_matches_cpu": not differ, "differ": differ, "timings": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
