"""Where the compile time of a shared unit goes, tool by tool, and what that says about the
fastest possible cold build of a whole matrix.

Each unit holds the first N cases of the selection (so a unit of 4 holds the unit of 2's cases
and two more), is generated and compiled exactly as the plugin compiles it (FlashInfer's flags,
nvcc's own plan with the module id written first, :mod:`pytest_tileconform.compile.nvcc_pipeline`),
but one step at a time, each timed with its CPU seconds and peak RSS (``wait4``). Units of
different sizes run side by side (``--parallel``) or one after another.

A least-squares line ``cpu = fixed + per_instantiation x N`` per tool then separates what a
unit pays once (parsing, host code) from what every instantiation costs (its kernel's device
code). ``floor_s`` is the per-instantiation CPU of a matrix of ``--matrix-cases`` spread over
``--cores`` cores with no fixed cost at all: no build of the matrix with these tools and flags
can be faster on that many cores.

    python benchmarks/compile_steps.py matrices/sm90.yaml --match sm90-bf16- --units 1 2 4 8 \\
        --parallel --matrix-cases 360 --cores 16 --json steps.json

``--harness-only`` also compiles each unit without its kernels (the harness, instantiated for
the unit's cases): what a unit compiles beyond its kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_tileconform.compile import nvcc_pipeline
from pytest_tileconform.flashinfer.axes import KINDS, moe_cases
from pytest_tileconform.flashinfer.buildscript import (
    HARNESS_SOURCE,
    compile_command,
    harness_part,
    kernel_config,
)
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, probe_unit
from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.features import release_features
from pytest_tileconform.flashinfer.nvcc_flags import nvcc_command
from pytest_tileconform.flashinfer.sources import find_sources
from pytest_tileconform.matrix.load import load_matrix


@dataclass(frozen=True)
class Step:
    """One step of nvcc's plan as it ran."""

    tool: str
    host_only_source: bool  # a .cpp the unit links (TensorRT-LLM's), compiled beside the .cu
    source: str  # the file it compiles: the unit (its kernels), its harness part, a .cpp
    wall_s: float
    cpu_s: float
    peak_rss_gb: float


def _source(step: nvcc_pipeline.Step) -> str:
    """Which file of the unit's compile a step is of: the unit's own (its kernels), its harness
    part, or a host-only source (TensorRT-LLM's .cpp files)."""
    if step.spare:
        return "host-only"
    return "harness" if Path(HARNESS_SOURCE).stem in step.command else "unit"


def _tool(command: str) -> str:
    return command.split()[0].strip("\"'").rsplit("/", 1)[-1]


def compile_unit(configs: list[KernelConfig], work: Path, harness_only: bool = False) -> dict[str, Any]:
    """Compile one unit of ``configs`` in ``work``, step by step; per-step wall, CPU, peak RSS.
    ``harness_only``: the unit without its kernels (:func:`.codegen.probe_unit`: the harness
    instantiated for each case, the launcher named, never instantiated), so that a unit's cost
    minus this one's is what its kernels cost."""
    sources = find_sources()
    work.mkdir(parents=True, exist_ok=True)
    src = work / "unit.cu"
    features = release_features(sources.root)
    if harness_only:
        src.write_text(probe_unit(configs, features))
    else:
        src.write_text(generate_translation_unit(configs, features, sources.version))
    argv = [*compile_command(nvcc_command(configs[0], sources, src, work / "harness")), "-odir", str(work)]
    if not harness_only:  # the unit's harness, its second translation unit, as the build adds it
        part = work / "part" / HARNESS_SOURCE
        part.parent.mkdir(exist_ok=True)
        part.write_text(harness_part(src.name))
        argv.insert(-2, str(part))
    private = Path(tempfile.mkdtemp(prefix="compile-steps-", dir=work)).resolve()
    plan = nvcc_pipeline.plan(argv, private)
    for path, text in plan.module_ids.items():
        Path(path).write_text(text)
    steps: list[Step] = []
    for step in plan.steps:
        started = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", step.command],
            env=plan.env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        steps.append(
            Step(
                tool=_tool(step.command),
                host_only_source=step.spare,
                source=_source(step),
                wall_s=round(time.monotonic() - started, 2),
                cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
                peak_rss_gb=round(usage.ru_maxrss / 1e6, 2),
            )
        )
        if status != 0:
            raise RuntimeError(f"step {step.index} ({steps[-1].tool}) failed; its work is in {work}")
    by_tool: dict[str, float] = {}
    for row in steps:
        key = "host-only sources" if row.host_only_source else row.tool
        by_tool[key] = round(by_tool.get(key, 0.0) + row.cpu_s, 2)
    by_source: dict[str, float] = {}
    for row in steps:
        by_source[row.source] = round(by_source.get(row.source, 0.0) + row.cpu_s, 2)
    tools = {row.tool for row in steps}
    return {
        "instantiations": 0 if harness_only else len(configs),
        "harness_only": harness_only,
        "cases": [c.name for c in configs],
        "cpu_s": round(sum(r.cpu_s for r in steps), 1),
        "cpu_s_by_tool": by_tool,
        "cpu_s_by_source": by_source,
        "peak_rss_gb_by_tool": {tool: max(r.peak_rss_gb for r in steps if r.tool == tool) for tool in tools},
        "steps": [asdict(r) for r in steps],
    }


def fit(units: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per tool: the least-squares ``fixed + per_instantiation x N`` over the units."""
    sizes = [u["instantiations"] for u in units]
    mean_n = sum(sizes) / len(sizes)
    spread = sum((n - mean_n) ** 2 for n in sizes)
    lines = {}
    for tool in sorted({t for u in units for t in u["cpu_s_by_tool"]}):
        cpu = [u["cpu_s_by_tool"].get(tool, 0.0) for u in units]
        mean_c = sum(cpu) / len(cpu)
        slope = (
            sum((n - mean_n) * (c - mean_c) for n, c in zip(sizes, cpu, strict=True)) / spread
            if spread
            else 0.0
        )
        lines[tool] = {"fixed_s": round(mean_c - slope * mean_n, 2), "per_instantiation_s": round(slope, 2)}
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("matrix", type=Path)
    parser.add_argument("--match", default="", help="take cases whose id contains this")
    parser.add_argument("--units", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--parallel", action="store_true", help="compile the units side by side")
    parser.add_argument("--matrix-cases", type=int, default=360, help="instantiations of the whole matrix")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", type=Path, default=None, help="where to compile (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--harness-only",
        action="store_true",
        help="also compile each unit without its kernels (the harness alone): the rest is the kernels'",
    )
    args = parser.parse_args(argv)
    cases = [c for c in moe_cases(load_matrix(args.matrix, KINDS).cases) if args.match in c.id]
    configs = list(dict.fromkeys(kernel_config(c) for c in cases))
    if len(configs) < max(args.units):
        parser.error(
            f"{len(configs)} instantiations match {args.match!r}; a unit of {max(args.units)} needs more"
        )
    work = args.work or Path(tempfile.mkdtemp(prefix="compile-steps-"))
    started = time.monotonic()
    jobs = [(n, False) for n in args.units] + ([(n, True) for n in args.units] if args.harness_only else [])
    with ThreadPoolExecutor(len(jobs) if args.parallel else 1) as pool:
        units = list(
            pool.map(lambda j: compile_unit(configs[: j[0]], work / f"unit-{j[0]}{'-h' * j[1]}", j[1]), jobs)
        )
    kernels = [u for u in units if not u["harness_only"]]
    lines = fit(kernels) if len(kernels) > 1 else {}
    per_instantiation = sum(line["per_instantiation_s"] for line in lines.values())
    report = {
        "matrix": str(args.matrix),
        "match": args.match,
        "parallel": args.parallel,
        "wall_s": round(time.monotonic() - started, 1),
        "units": units,
        "fit": lines,
        "per_instantiation_cpu_s": round(per_instantiation, 1),
        "floor_s": round(args.matrix_cases * per_instantiation / args.cores, 0) if lines else None,
        "floor_for": {"instantiations": args.matrix_cases, "cores": args.cores},
    }
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
