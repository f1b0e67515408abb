"""The virtual sm90 profile against the H200 on failing cases: a few cases of
matrices/sm90-failures.yaml are judged on the virtual device, through the plugin as users run
it, and must fail at the stage, with the status, that the hardware recording wrote into the
matrix's expectations (lab/gpu-failures.sh, --tile-update on an H200).

The cases share one translation unit (one dtype, one compile, about 100 s and 6 GB here), kept
in a cache of the test's own between runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO

from pytest_tileconform.compile.cache import default_cache_dir
from pytest_tileconform.matrix.load import load_matrix

ROOT = REPO
MATRIX = ROOT / "matrices" / "sm90-failures.yaml"
#: A cluster of 32 refused at launch, a problem whose A rows of 200 bytes break TMA's 16-byte
#: global stride rule, which the virtual device predicts to fault at run, and a finalize D of
#: 200-byte rows, which it predicts to be wrong (numerics) without running anything.
CASES = (
    "sm90-bf16-128x128x64-c8x4x1-none",
    "sm90-bf16-128x128x64-c1x1x1-finalize-k100",
    "sm90-bf16-128x128x64-c1x1x1-finalize-n100",
)
UNIT_CACHE = default_cache_dir().with_name(f"{default_cache_dir().name}-e2e-failures")


@pytest.mark.slow
def test_virtual_sm90_fails_where_the_h200_recorded(tmp_path: Path) -> None:
    recorded = {c.id: c.expectation for c in load_matrix(MATRIX, TEST_KINDS).cases if c.id in CASES}
    assert sorted(recorded) == sorted(CASES), "the matrix no longer has these cases"
    unrecorded = [case for case, e in recorded.items() if e is None or "hardware" not in (e.source or "")]
    if len(unrecorded) == len(CASES):
        pytest.skip(f"{MATRIX.name} has no hardware recording yet (lab/gpu-failures.sh)")
    assert not unrecorded, f"recorded on hardware only in part: {unrecorded}"
    report = tmp_path / "virtual.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--tile-matrix",
            str(MATRIX),
            "--tile-device",
            "virtual",
            "-k",
            " or ".join(CASES),
            "--tile-build-jobs",
            "1",
            "--tile-cache-dir",
            str(UNIT_CACHE),
            "--tile-report",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    virtual = {c["id"]: c["verdict"] for c in json.loads(report.read_text())["cases"]}
    # -k matches substrings: it also selects cases whose ids extend these (k100e, n100t1)
    assert set(CASES) <= set(virtual)
    for case, expectation in recorded.items():
        assert expectation is not None
        verdict = virtual[case]
        assert verdict["source"] == "virtual (sm90 profile)"
        assert (verdict["failed_stage"], verdict["status"]) == (expectation.stage, expectation.status), case
        assert verdict["judged_through"] == "launch" and not verdict["kernel_ran"], case
        if expectation.smem is not None:
            assert verdict["smem_requested"] == expectation.smem, case
