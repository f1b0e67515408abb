"""The test plugin ``tests/plugins/tileconform_faults.py`` through a whole pytest session on the
FlashInfer backend's hardware path, on the CPU: a stand-in plays the case runner (the part a
GPU host runs), so the backend writes each case's inputs, calls the
``pytest_tileconform_before_run`` hook, reads the harness's verdict.json and checks D as there."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fake_backend import TileRun, output

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.harness_report import VERDICT_FILE
from pytest_tileconform.flashinfer.reference import _le_bytes, make_inputs, output_dtype, reference_output
from pytest_tileconform.flashinfer.runner import CaseRun
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.matrix.load import load_matrix

PLUGINS = Path(__file__).parent / "plugins"
MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64]
    problems: {experts: 2, rows: 8, n: 64, k: 64}
"""
FAULTY = "sm90-bf16-128x64x64-c1x1x1-none"
GOOD = "sm90-bf16-128x128x64-c1x1x1-none"


class StandInRunner:
    """The case runner's part. A case whose problem.txt asks for the trap ends as a trapping
    kernel does (harness.cu: the sticky ``cudaErrorLaunchFailure`` at ``run``); any other
    writes the reference D and passes."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = {kernel_config(case).name: case for case in cases}
        self.problems: dict[str, str] = {}  # case id -> its problem.txt as the harness read it

    def start(self) -> None:
        pass

    def run(self, unit: Path, run_dir: Path, name: str, timeout: float) -> CaseRun:
        case = self.cases[name]
        problem = (run_dir / "problem.txt").read_text()
        self.problems[case.id] = problem
        if "inject_fault trap" in problem:
            fields = {"final": True, "stage": "run", "status": "cudaErrorLaunchFailure", "message": "trap"}
        else:
            expected = reference_output(make_inputs(case, 0), case)
            (run_dir / "d.bin").write_bytes(_le_bytes(expected.to(output_dtype(case.out))))
            fields = {"final": True, "stage": "pass", "status": "Success", "message": ""}
        (run_dir / VERDICT_FILE).write_text(json.dumps(fields))
        return CaseRun(0 if fields["stage"] == "pass" else 1, None)


@pytest.fixture
def runner(tc: TileRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandInRunner:
    """The FlashInfer backend of the in-process sessions sees an H200-like GPU and judges from
    a unit that needs no compile, through the stand-in runner."""
    matrix = tc.matrix(MATRIX)
    stand_in = StandInRunner(list(load_matrix(matrix, ["flashinfer-cutlass-moe"]).cases))
    gpu = Gpu(index="0", uuid="GPU-stand-in", name="Stand-in", sm=90, driver="0")
    built = BuildResult(ok=True, path=tmp_path, seconds=0.0)
    monkeypatch.setattr(FlashInferBackend, "prepare", lambda self, cases: None)
    monkeypatch.setattr(FlashInferBackend, "_build", lambda self, case: built)
    monkeypatch.setattr(FlashInferBackend, "_incompatibility", None)
    sources = SimpleNamespace(version="0", root=tmp_path)
    monkeypatch.setattr(FlashInferBackend, "sources", property(lambda self: sources))
    # the stand-in host has what a GPU host needs: no toolkit is looked for, nothing is built
    monkeypatch.setattr(FlashInferBackend, "check_environment", lambda self, cases: None)
    monkeypatch.setattr(FlashInferBackend, "is_built", lambda self, case: True)
    monkeypatch.setattr(FlashInferBackend, "gpu", property(lambda self: gpu))
    monkeypatch.setattr(FlashInferBackend, "_hardware_runner", property(lambda self: stand_in))
    monkeypatch.syspath_prepend(str(PLUGINS))
    return stand_in


def _args(tmp_path: Path) -> tuple[str, ...]:
    return ("--tile-device", "hardware", "--tile-cache-dir", str(tmp_path / "c"), "-p", "tileconform_faults")


def _outcomes(tc: TileRun) -> dict[str, str]:
    return {record["id"]: record["outcome"] for record in tc.log("verdicts.jsonl")}


def test_an_injected_fault_fails_only_its_case_at_run(
    tc: TileRun, runner: StandInRunner, tmp_path: Path
) -> None:
    threads = torch.get_num_threads()
    result = tc.run(*_args(tmp_path), "--tile-inject-fault", FAULTY)
    assert result.ret == 1, output(result)
    result.assert_outcomes(passed=1, failed=1)
    assert _outcomes(tc) == {FAULTY: "run", GOOD: "pass"}
    assert "status='cudaErrorLaunchFailure'" in output(result)
    assert runner.problems[FAULTY].endswith("inject_fault trap\n")
    assert "inject_fault" not in runner.problems[GOOD]
    # the session restored what judging changed in this process (backend.finish at its end)
    assert torch.get_num_threads() == threads and gc.get_freeze_count() == 0


def test_without_the_option_every_case_passes(tc: TileRun, runner: StandInRunner, tmp_path: Path) -> None:
    result = tc.run(*_args(tmp_path))
    assert result.ret == 0, output(result)
    assert _outcomes(tc) == {FAULTY: "pass", GOOD: "pass"}
    assert not any("inject_fault" in problem for problem in runner.problems.values())
