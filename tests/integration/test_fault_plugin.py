"""The test plugin ``tests/helpers/plugins/tileconform_faults.py`` through a whole pytest session on the
FlashInfer backend's hardware path, on the CPU: a stand-in plays the case runner (the part a
GPU host runs), so the backend writes each case's inputs, calls the
``pytest_tileconform_before_run`` hook, reads the harness's verdict.json and checks D as there."""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from helpers.fake_backend import TEST_KINDS, TileRun, output
from helpers.numerics_standin import inputs_in
from helpers.paths import PLUGINS

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.compile.handles import CheckedFiles
from pytest_tileconform.compile.trust import TrustPolicy
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer.axes import MoeCase, moe_cases
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.harness_report import VERDICT_FILE
from pytest_tileconform.flashinfer.numerics.full import expected_for
from pytest_tileconform.flashinfer.numerics.reference import output_dtype
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes
from pytest_tileconform.flashinfer.numerics.tolerance import POISON_BYTE
from pytest_tileconform.flashinfer.runner import CaseRun
from pytest_tileconform.matrix.load import load_matrix

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
#: the faults of the plugin and the stage each must end its case at (tileconform_faults.FAULTS)
FAULTS = {
    "trap": "run",
    "uninit-workspace": "numerics",
    "unwritten-d": "numerics",
    "race": "graph",
    "workspace-race": "sequence",
    "pending-error": "prepare",
    "pending-after": "run",
    "scale-d": "numerics",
}
GOOD = "sm90-bf16-128x128x64-c1x1x1-none"
#: what a fault needs beside it: the workspace race is the sequence stage's, alone after the run
STAGE_ARGS = {
    "workspace-race": ("--tile-sequence", "1000", "--tile-graph-replays", "0", "--tile-repeats", "0"),
}


def reference_d(case: MoeCase, run_dir: Path) -> bytes:
    """A correct D for the input family whose A the run directory holds (seed 0)."""
    inputs = inputs_in(run_dir, case, 0)
    return _le_bytes(expected_for(inputs, case).value.to(output_dtype(case.out)))


class StandInRunner:
    """The case runner's part. A case whose problem.txt names a hook gets what the harness
    leaves behind with that fault (tileconform_faults_hook.cu on a GPU): the trap's sticky
    error at run, a D the poison shows in, a graph replay or a sequence run that changed D, a
    pending error cleared and failing the case at prepare; any other case writes the reference
    D and passes."""

    def __init__(self, cases: list[MoeCase]) -> None:
        self.cases = {kernel_config(case).name: case for case in cases}
        self.problems: dict[str, str] = {}  # case id -> its problem.txt as the harness read it
        self.hooks: dict[str, bool] = {}  # case id -> whether the hook library it named was there

    def start(self) -> None:
        pass

    def run(self, unit: Path, run_dir: Path, name: str, timeout: float) -> CaseRun:
        case = self.cases[name]
        problem = (run_dir / "problem.txt").read_text()
        self.problems[case.id] = problem
        hook = [line.split() for line in problem.splitlines() if line.startswith("hook ")]
        fault = hook[0][2] if hook else None
        if hook:
            self.hooks[case.id] = Path(hook[0][1]).is_file()
        d = bytearray(reference_d(case, run_dir))
        fields: dict[str, Any] = {"final": True, "stage": "pass", "status": "Success", "message": ""}
        if fault == "trap":
            fields.update(stage="run", status="cudaErrorLaunchFailure", message="trap")
        elif fault == "uninit-workspace":
            d[:256] = bytes(byte | POISON_BYTE for byte in d[:256])
        elif fault == "unwritten-d":
            d[:] = bytes([POISON_BYTE]) * len(d)
        elif fault == "race":
            (run_dir / "d.graph.bin").write_bytes(b"\x3c" * 256 + bytes(d[256:]))
            fields["graph"] = {
                "runs": 8,
                "changed_runs": 8,
                "most_changed_elements": 128,
                "saved": "d.graph.bin",
            }
        elif fault == "workspace-race" and "sequence 1000 1000" in problem.splitlines():
            (run_dir / "d.sequence.bin").write_bytes(bytes([POISON_BYTE]) * 512 + bytes(d[512:]))
            fields["sequence"] = {
                "runs": 5000,
                "changed_runs": 3,
                "most_changed_elements": 256,
                "saved": "d.sequence.bin",
            }
        elif fault == f"scale-d:{case.out}":
            scaled = torch.frombuffer(bytearray(d), dtype=output_dtype(case.out)).double() * 1.01
            d[:] = _le_bytes(scaled.to(output_dtype(case.out)))
        elif fault == "pending-after":
            fields.update(stage="run", status="cudaErrorMemoryAllocation", message="left pending by the case")
            fields["cleared_errors"] = [{"when": "after the case", "name": "cudaErrorMemoryAllocation"}]
        elif fault == "pending-error":
            fields.update(
                stage="prepare", status="cudaErrorMemoryAllocation", message="pending before the case"
            )
            fields["cleared_errors"] = [{"when": "before the case", "name": "cudaErrorMemoryAllocation"}]
        (run_dir / "d.bin").write_bytes(bytes(d))
        (run_dir / VERDICT_FILE).write_text(json.dumps(fields))
        return CaseRun(0 if fields["stage"] == "pass" else 1, None)


@pytest.fixture
def runner(tc: TileRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandInRunner:
    """The FlashInfer backend of the in-process sessions sees an H200-like GPU and judges from
    a unit that needs no compile, through the stand-in runner."""
    matrix = tc.matrix(MATRIX)
    stand_in = StandInRunner(moe_cases(load_matrix(matrix, TEST_KINDS, ["flashinfer-cutlass-moe"]).cases))
    gpu = Gpu(index="0", uuid="GPU-stand-in", name="Stand-in", sm=90, driver="0")
    (tmp_path / "harness").write_bytes(b"")  # what the backend hands the runner: checked, never run
    empty = hashlib.sha256(b"").hexdigest()
    built = BuildResult(True, tmp_path, 0.0, files=CheckedFiles(tmp_path, {"harness": empty}, TrustPolicy()))
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
    from tileconform_faults import FAULTS as known

    assert known == FAULTS
    return stand_in


def _args(tmp_path: Path) -> tuple[str, ...]:
    return ("--tile-device", "hardware", "--tile-cache-dir", str(tmp_path / "c"), "-p", "tileconform_faults")


def _outcomes(tc: TileRun) -> dict[str, str]:
    return {record["id"]: record["outcome"] for record in tc.log("verdicts.jsonl")}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_injected_fault_fails_its_case_at_its_stage_and_no_other(
    tc: TileRun, runner: StandInRunner, tmp_path: Path, fault: str
) -> None:
    threads = torch.get_num_threads()
    result = tc.run(*_args(tmp_path), *STAGE_ARGS.get(fault, ()), "--tile-inject-fault", f"{FAULTY}={fault}")
    expected = FAULTS[fault]
    assert result.ret == (0 if expected == "pass" else 1), output(result)
    assert _outcomes(tc) == {FAULTY: expected, GOOD: "pass"}
    arg = f"{fault}:bf16" if fault == "scale-d" else fault  # scale-d names D's type
    assert runner.problems[FAULTY].endswith(f" {arg}\n") and runner.hooks[FAULTY]
    assert "hook" not in runner.problems[GOOD]
    # the session restored what judging changed in this process (backend.finish at its end)
    assert torch.get_num_threads() == threads and gc.get_freeze_count() == 0


def test_a_fault_without_a_kind_is_the_trap(tc: TileRun, runner: StandInRunner, tmp_path: Path) -> None:
    result = tc.run(*_args(tmp_path), "--tile-inject-fault", FAULTY)
    assert result.ret == 1, output(result)
    assert _outcomes(tc) == {FAULTY: "run", GOOD: "pass"}
    assert "status='cudaErrorLaunchFailure'" in output(result)


def test_an_unknown_fault_is_a_usage_error(tc: TileRun, runner: StandInRunner, tmp_path: Path) -> None:
    result = tc.run(*_args(tmp_path), "--tile-inject-fault", f"{FAULTY}=meteor")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown fault 'meteor'; known: trap, uninit-workspace" in output(result)


def test_without_the_option_every_case_passes(tc: TileRun, runner: StandInRunner, tmp_path: Path) -> None:
    """...on both input families: the report says what each family's check found."""
    report = tmp_path / "report.json"
    result = tc.run(*_args(tmp_path), "--tile-report", str(report))
    assert result.ret == 0, output(result)
    assert _outcomes(tc) == {FAULTY: "pass", GOOD: "pass"}
    for case in json.loads(report.read_text())["cases"]:
        extra = case["verdict"]["extra"]
        assert extra["numerics"].startswith("ok: 0/") and extra["numerics_full"].startswith("ok: 0/")
    assert not any("hook" in problem for problem in runner.problems.values())
