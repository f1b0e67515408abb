"""How a weight-only case's GPU run becomes its verdict, without a GPU: a stand-in harness (a
Python script in the harness's place, reading the operand files and writing D as the kernel
computes it) passes; one that writes a wrong element, faults, changes D in a graph replay or a
repeat, or whose launcher refuses the problem, fails at that stage."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.hardware import judge_on_gpu
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.verdict import Stage

GPU = Gpu("0", "GPU-0", "NVIDIA H200", 90, "580")
M, N, K, GROUP = 5, 64, 256, 128
CASE: Case[DenseAxes] = Case(
    Path("m.yaml"), "dense", "sm90", "bf16", "int4", "bf16", "bf16xint4-bf16", (128, 64, 64),
    DenseAxes(False, (M, N, K), cluster=(1, 1, 1), group=GROUP), None, None,
)  # fmt: skip

#: the stand-in: D from the operand files as the kernel computes it; FAULT says what to get wrong
STAND_IN = """
import json, os, sys, torch
from pytest_tileconform.flashinfer_dense.weight_only import stored_k
run_dir, m, n, k, group, mode = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
replays, repeats = (int(v) for v in sys.argv[7:9])
fault = os.environ.get("FAULT", "")
def load(name, dtype):
    return torch.frombuffer(bytearray(open(f"{run_dir}/{name}", "rb").read()), dtype=dtype)
def verdict(**fields):
    json.dump({"workspace_bytes": 4096, **fields}, open(f"{run_dir}/verdict.json", "w"))
if fault == "can_implement":
    verdict(outcome="threw", message="fpA_intB cutlass kernel will fail for params. "
            "Error: Error Misaligned Operand")
    sys.exit(0)
a = load("a.bin", torch.int16).view(torch.bfloat16).reshape(m, k)
raw = load("b.bin", torch.uint8)
stored = torch.stack([raw & 0xF, raw >> 4], dim=1).reshape(n, k).to(torch.int16) - 8
w = torch.empty_like(stored)
w[:, stored_k("int4", k)] = stored  # the launcher's layout undone (tested in test_weight_only)
s = load("s.bin", torch.int16).view(torch.bfloat16).reshape(k // group, n)
b = (w.to(torch.bfloat16) * s.repeat_interleave(group, dim=0).T).to(torch.float32)
d = (a.to(torch.float32) @ b.T).to(torch.bfloat16)
checked = d.clone()
if fault == "numerics":
    d.view(torch.int16)[1, 2] += 1
open(f"{run_dir}/d.bin", "wb").write(d.view(torch.int16).numpy().tobytes())
stage = lambda runs, changed: {"runs": runs, "changed_runs": changed, "most_changed": changed, "error": ""}
stages = {"run": "cudaErrorIllegalAddress" if fault == "run" else "",
          "graph": stage(replays, 1 if fault == "graph" else 0), "repeat": stage(repeats, 0)}
verdict(outcome="returned", message="", stages=stages)
"""


class StandIn:
    """A build whose program is the stand-in script."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def running(self) -> Iterator[Path]:
        yield self.path


@pytest.fixture
def built(tmp_path: Path) -> BuildResult:
    script = tmp_path / "harness"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}")
    script.chmod(0o755)
    return cast(BuildResult, StandIn(script))


def judge(built: BuildResult, monkeypatch: pytest.MonkeyPatch, fault: str = "") -> Any:
    monkeypatch.setenv("FAULT", fault)
    return judge_on_gpu(CASE, built, (str(M), str(N), str(K), str(GROUP)), GPU, timeout=120)


def test_a_kernel_that_computes_d_passes_both_families_and_the_replays(
    built: BuildResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    verdict = judge(built, monkeypatch)
    assert verdict.failed_stage is None and verdict.judged_through is Stage.REPEAT, verdict.describe()
    assert verdict.extra["numerics"].startswith("ok") and verdict.extra["numerics_full"].startswith("ok")
    assert verdict.extra["graph"]["runs"] == 3 and verdict.source == "hardware (NVIDIA H200)"
    assert json.dumps(verdict.extra)  # the results file takes it


@pytest.mark.parametrize(
    ("fault", "stage", "said"),
    [
        ("numerics", Stage.NUMERICS, "1/320 over the bound"),
        ("run", Stage.RUN, "the kernel faulted"),
        ("graph", Stage.GRAPH, "1 of 3 runs changed D"),
        ("can_implement", Stage.CAN_IMPLEMENT, "Misaligned Operand"),
    ],
)
def test_what_goes_wrong_is_the_verdict_of_its_stage(
    built: BuildResult, monkeypatch: pytest.MonkeyPatch, fault: str, stage: Stage, said: str
) -> None:
    verdict = judge(built, monkeypatch, fault)
    assert verdict.failed_stage is stage and said in verdict.detail, verdict.describe()
