"""FlashInfer's own answer to "which dense CUTLASS tactics does the autotuner offer on ARCH", found
without the dense backend's reader, to test that reader against:

- the tactic lists: each runner header's ``getConfigs()`` body, compiled as it is by g++ against
  FlashInfer's ``cutlass_gemm_configs.h`` (host code, no nvcc, about 10 s) and run: the compiler,
  not a parser, evaluates its loops and ``best_tactics_index`` reordering;
- which runner an architecture tunes and its ids: FlashInfer's Python run in a subprocess with its
  JIT's ``build_and_load`` replaced by a module whose ``<kind>_gemm_tactic_num()`` is the compiled
  list's length: ``get_cutlass_fp4_gemm_module(major, minor)``, ``get_cutlass_mxfp8_gemm_module``,
  the fp8 heuristic's ``cutlass_sm10x`` / ``cutlass_sm12x`` choice, the bf16 runner, each where its
  ``_cutlass_*_requirement`` lists the compute capability, then the runner's ``get_valid_tactics``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from pytest_tileconform.flashinfer.sources import FlashInferSources, find_cuda_home
from pytest_tileconform.flashinfer_dense.offered import Family

#: per config: (tile enum value, cluster enum value, swap_ab, use_stream_k)
Config = tuple[int, int, bool, bool]


def _get_configs_body(header: Path) -> str:
    text = header.read_text()
    found = re.search(r"getConfigs\(\)\s*const\s*(?:override\s*)?\{", text)
    assert found is not None, header
    depth, i = 1, found.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[found.end() : i - 1]


def _tile_enum(family: Family) -> str:
    return "CutlassTileConfigSM120" if family.majors == (12,) else "CutlassTileConfigSM100"


def compiled_configs(
    sources: FlashInferSources, families: list[Family], workdir: Path
) -> tuple[dict[str, list[Config]], dict[str, list[Config]]]:
    """Per module: the configs its ``getConfigs()`` returns, and the reader's tactics as the same
    compiler spells their enum names, both as (tile, cluster, swap_ab, stream_k) values."""
    lines = [
        "#include <algorithm>",
        "#include <iostream>",
        "#include <vector>",
        '#include "flashinfer/gemm/cutlass_gemm_configs.h"',
        "using namespace flashinfer::gemm;",
    ]
    prints = []
    for family in families:
        lines.append(
            f"std::vector<CutlassGemmConfig> get_{family.module}() {{{_get_configs_body(family.runner)}}}"
        )
        field = "tile_config_sm120" if family.majors == (12,) else "tile_config_sm100"
        prints.append(
            f'for (auto& c : get_{family.module}()) std::cout << "run {family.module} " << (int)c.{field} '
            '<< " " << (int)c.cluster_shape << " " << c.swap_ab << " " << c.use_stream_k << "\\n";'
        )
        for t in family.tactics:
            cluster = "x".join(map(str, t.cluster))
            prints.append(
                f'std::cout << "read {family.module} " << (int){_tile_enum(family)}::{t.tile} << " " '
                f'<< (int)ClusterShape::ClusterShape_{cluster} << " {int(t.swap_ab)} {int(t.stream_k)}\\n";'
            )
    lines.append("int main() {\n" + "\n".join(prints) + "\n}")
    source = workdir / "get_configs.cpp"
    source.write_text("\n".join(lines))
    data = sources.root
    includes = [data / "include", data / "cutlass" / "include", data / "cccl" / "libcudacxx" / "include"]
    includes.append(find_cuda_home() / "include")
    program = workdir / "get_configs"
    subprocess.run(
        ["g++", "-std=c++17", *(f"-I{p}" for p in includes), str(source), "-o", str(program)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    found: dict[str, dict[str, list[Config]]] = {"run": {}, "read": {}}
    for line in out.splitlines():
        which, module, tile, cluster, swap, stream_k = line.split()
        config = (int(tile), int(cluster), swap == "1", stream_k == "1")
        found[which].setdefault(module, []).append(config)
    return found["run"], found["read"]


_SCRIPT = r"""
import json, sys
import torch
import flashinfer.gemm.gemm_base as g
from flashinfer.jit.core import JitSpec

counts, archs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
asked = []


class Module:
    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        if attr.endswith("_gemm_tactic_num"):
            asked.append(self.name)
            return lambda: counts[self.name]
        return lambda *args, **kwargs: None  # a kernel entry point: never called here


JitSpec.build_and_load = lambda self, *a, **k: Module(self.name)


def runners(arch):
    major, minor = divmod(arch, 10)
    g.get_compute_capability = lambda device: (major, minor)
    for cached in vars(g).values():  # the module getters are functools.cache'd
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    made = []
    if arch in g._cutlass_gemm_fp4_requirement._supported_ccs:
        made.append(g.get_cutlass_fp4_gemm_module(major, minor).cutlass_fp4_gemm_runner())
    if arch in g._cutlass_gemm_mxfp8_requirement._supported_ccs:
        made.append(g.get_cutlass_mxfp8_gemm_module(major).cutlass_mxfp8_gemm_runner())
    if arch in g._cutlass_mm_fp8_requirement._supported_ccs:
        a = torch.empty((1, 16, 16), dtype=torch.float8_e4m3fn)
        chosen = g._heuristic_func_bmm_fp8(["cutlass"], a, a, None, None, torch.bfloat16)
        factories = {
            "cutlass_sm10x": lambda: g.get_gemm_sm100_module_cutlass_fp8().cutlass_fp8_gemm_runner(),
            "cutlass_sm12x": lambda: g.get_gemm_sm120_module_cutlass_fp8().cutlass_fp8_gemm_runner(),
        }
        made += [factories[name]() for name in chosen if name in factories]
    if arch in g._cutlass_mm_bf16_requirement._supported_ccs:
        made.append(g.get_gemm_sm100_module_cutlass_bf16().cutlass_bf16_gemm_runner())
    # aligned operands: the bf16 runner offers nothing for a K or N its kernel cannot load
    x = torch.empty((16, 16), dtype=torch.bfloat16)
    found = []
    for runner in made:
        asked.clear()
        ids = list(runner.get_valid_tactics([x, x, None, None, x, None], None))
        found.append([type(runner).__name__, asked[-1] if asked else None, ids])
    return found


print(json.dumps({arch: runners(arch) for arch in archs}))
"""


def flashinfer_runners(
    archs: list[int], counts: dict[str, int], workdir: Path
) -> dict[int, list[tuple[str, str | None, list[int]]]]:
    """Per architecture: (runner class, the JIT module it asked for its tactic count,
    ``get_valid_tactics``) of every dense CUTLASS runner FlashInfer's own Python makes there; in a
    subprocess, so that its JIT caches and modules stay out of the test's."""
    env = {
        **os.environ,
        "FLASHINFER_WORKSPACE_BASE": str(workdir),
        "FLASHINFER_CUDA_ARCH_LIST": "10.0a 10.3a 12.0a 12.1a",
    }
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(counts), json.dumps(archs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    return {int(arch): [(cls, module, ids) for cls, module, ids in rows] for arch, rows in found.items()}
