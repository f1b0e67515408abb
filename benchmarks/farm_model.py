"""The cold build of a matrix on a build farm, as the planner's cost model predicts it: the units a
``--tile-build-on`` run plans (for the farm's cores and memory together, as the farm reports
them), each a Ray task holding the cores its compile keeps busy, placed longest first on the
node that frees a slot first. Compile only; no fetch, no judging. A model: check it against a
measured run of the same matrix on one node before trusting it for many.

    python benchmarks/farm_model.py matrices/sm90-mixed-flashinfer.yaml --nodes 1 4 --cores 16 \\
        --memory-gb 128
"""

from __future__ import annotations

import argparse
import heapq
import math
from pathlib import Path

from pytest_tileconform.flashinfer.axes import KINDS, moe_cases
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.planner import (
    DEFAULT_GROUP,
    compile_ram,
    is_mixed_input,
    plan_units,
    unit_seconds,
)
from pytest_tileconform.matrix.load import load_matrix
from pytest_tileconform.matrix.shard import Shard


def makespan(units: list[tuple[float, float, int]], nodes: int, cores: int, memory: int) -> float:
    """Seconds until the last of ``units`` (critical path, CPU seconds, RAM bytes each) ends on
    ``nodes`` of ``cores`` and ``memory`` bytes: each unit holds ceil(cpu/path) cores and its RAM
    from its start to its end."""
    running: list[tuple[float, int, float, float]] = []  # end, node, cores, ram
    room = {n: [float(cores), float(memory) * 0.85] for n in range(nodes)}
    now = 0.0
    end = 0.0
    for path, cpu, ram in sorted(units, key=lambda u: -u[0]):
        need = min(float(cores), max(1.0, math.ceil(cpu / path)))
        while True:
            fits = [n for n in range(nodes) if room[n][0] >= need and room[n][1] >= min(ram, memory * 0.85)]
            if fits:
                node = fits[0]
                break
            done, node, c, r = heapq.heappop(running)
            now = max(now, done)
            room[node][0] += c
            room[node][1] += r
        room[node][0] -= need
        room[node][1] -= min(ram, memory * 0.85)
        heapq.heappush(running, (now + path, node, need, min(ram, memory * 0.85)))
        end = max(end, now + path)
    return end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", type=Path)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--cores", type=int, default=16, help="cores per node")
    parser.add_argument("--memory-gb", type=float, default=128.0, help="memory per node")
    parser.add_argument("--group", type=int, default=DEFAULT_GROUP)
    parser.add_argument("--shard", type=Shard.parse, help="I/N: only the cases --tile-shard I/N runs")
    args = parser.parse_args()
    cases = moe_cases(load_matrix(args.matrix, KINDS).cases)
    if args.shard is not None:
        cases = [case for case in cases if args.shard.owns(case.id)]
    first = {kernel_config(case): case for case in reversed(cases)}  # one case per instantiation
    kernels = list(reversed(first.values()))
    memory = int(args.memory_gb * 1e9)
    for nodes in args.nodes:
        units = plan_units(kernels, args.group, cores=nodes * args.cores, memory=nodes * memory, jobs=None)
        costed = []
        for unit in units:
            path, cpu = unit_seconds(unit[0].sm, len(unit), is_mixed_input(unit[0]))
            costed.append((path, cpu, compile_ram(unit[0].sm, len(unit))))
        wall = makespan(costed, nodes, args.cores, memory)
        sizes = sorted({len(u) for u in units})
        shard = f" shard {args.shard}" if args.shard else ""
        print(
            f"{args.matrix.name}{shard}: {len(kernels)} kernels, {nodes} node(s) x {args.cores} cores, "
            f"{args.memory_gb:g} GB each: {len(units)} units of {sizes[0]}-{sizes[-1]}, "
            f"{sum(c for _, c, _ in costed) / 60:.0f} CPU-min, modeled wall {wall / 60:.1f} min"
        )


if __name__ == "__main__":
    main()
