"""End to end on the CPU: real FlashInfer instantiations compiled and judged on the virtual
sm90 device, through the plugin as users run it, checked against the verdicts the H200 gave for
the same cases (results/). The two smoke cases (one dtype: a shared unit never mixes dtypes) are
compiled together in one shared translation unit (one compile job), with the failing cases
test_failures_fidelity.py judges (:mod:`helpers.virtual_sm90`: one run and one compile serve
both), so this also checks that grouped builds judge as single builds did on the H200: about
200 CPU-s here for both tests (nvcc's passes side by side), kept in a cache of its own next to
the suite's. The unit's hardware form (a shared library) is then run by the case runner, which on
this GPU-less machine gets as far as the device query."""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.evidence import report
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO
from helpers.virtual_sm90 import SMOKE, SMOKE_CASES, UNIT_CACHE, judge_on_virtual_sm90

from pytest_tileconform.core.devices import current_gpu
from pytest_tileconform.flashinfer.axes import moe_cases
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.numerics.reference import make_inputs
from pytest_tileconform.flashinfer.numerics.runfiles import write_inputs
from pytest_tileconform.flashinfer.runner import HarnessRunner, build_runner
from pytest_tileconform.matrix.load import load_matrix

ROOT = REPO
CASES = SMOKE_CASES
HARDWARE_REPORT = report("smoke-hardware")


@pytest.mark.slow
def test_virtual_sm90_verdicts_of_a_shared_unit_match_the_h200(tmp_path: Path) -> None:
    judged = judge_on_virtual_sm90(tmp_path / "virtual.json")
    virtual = {i: c for i, c in judged.items() if c["matrix"].endswith(Path(SMOKE).name)}
    hardware = {c["id"]: c for c in json.loads(HARDWARE_REPORT.read_text())["cases"]}
    assert sorted(virtual) == sorted(CASES)
    units = {virtual[case]["verdict"]["extra"]["build"] for case in CASES}
    assert len(units) == 1, units  # both came out of one shared translation unit
    for case in CASES:
        assert virtual[case]["outcome"] == "unrun"  # a virtual pass: no kernel ran
        verdict = virtual[case]["verdict"]
        assert verdict["source"] == "virtual (sm90 profile)"
        assert verdict["judged_through"] == "launch"
        assert hardware[case]["verdict"]["outcome"] == "pass"
        assert verdict["smem_requested"] == hardware[case]["verdict"]["smem_requested"]
        assert verdict["smem_limit"] == 232448  # sm90 opt-in limit, CUDA guide / CUTLASS arch.h
        assert verdict["workspace_bytes"] == hardware[case]["verdict"]["workspace_bytes"]

    hardware_unit = Path(units.pop()) / "harness"
    matrix_cases = {
        c.id: c for c in moe_cases(load_matrix(ROOT / "matrices" / "smoke-sm90.yaml", TEST_KINDS).cases)
    }
    runner = HarnessRunner(functools.partial(build_runner, tmp_path / "cache"))
    for case in CASES:
        run_dir = tmp_path / case
        run_dir.mkdir()
        write_inputs(make_inputs(matrix_cases[case], 0), run_dir)
        result = runner.run(hardware_unit, run_dir, kernel_config(matrix_cases[case]).name, 120)
        ran = json.loads((run_dir / "verdict.json").read_text())
        assert result.failure is None, result.failure
        assert ran["config"]["tile"] == list(matrix_cases[case].tile)
        if current_gpu() is None:
            assert (result.status, ran["stage"]) == (1, "setup")
            assert ran["status"] in ("cudaErrorNoDevice", "cudaErrorInsufficientDriver"), ran
        else:
            assert (result.status, ran["stage"]) == (0, "pass")
    assert runner.started == 1
    runner.close()


MIXED_CASE = "sm90-fp8_e4m3xint4-bf16-64x16x128-c1x1x1-none-pingpong-swapab"
MIXED_REPORT = report("w4a8-c1-pingpong-hardware")


@pytest.mark.slow
def test_a_mixed_input_kernel_on_the_virtual_device_matches_the_h200(tmp_path: Path) -> None:
    """One of SM90's mixed-input kernels (W4A8) built as users run the shipped matrix: its own
    launcher, FlashInfer's weight interleave and the precomputed scheduler's launches pass the
    virtual device through launch, asking the shared memory and workspace the H200 saw
    (about 120 s and 5 GB here, in the test's own cache)."""
    report = tmp_path / "virtual.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            "--tile-matrix", "matrices/sm90-mixed-flashinfer.yaml", "--tile-device", "virtual",
            "-k", MIXED_CASE, "--tile-build-jobs", "1",
            "--tile-cache-dir", str(UNIT_CACHE.with_name(UNIT_CACHE.name + "-mixed")),
            "--tile-report", str(report),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (virtual,) = json.loads(report.read_text())["cases"]
    hardware = {c["id"]: c for c in json.loads(gzip.decompress(MIXED_REPORT.read_bytes()))["cases"]}
    assert virtual["id"] == MIXED_CASE and virtual["outcome"] == "unrun"
    verdict, seen = virtual["verdict"], hardware[MIXED_CASE]["verdict"]
    assert (verdict["judged_through"], seen["judged_through"]) == ("launch", "repeat")
    assert seen["outcome"] == "pass" and seen["kernel_ran"]
    assert verdict["smem_requested"] == seen["smem_requested"]
    assert verdict["workspace_bytes"] == seen["workspace_bytes"]
    # four experts' weight interleaves, the work-tile map, the GEMM
    assert verdict["extra"]["launches"] == 6
