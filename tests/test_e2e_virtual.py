"""End to end on the CPU: a real FlashInfer instantiation compiled and judged on the virtual
sm90 device, through the plugin as users run it, checked against the verdict the H200 gave for
the same case (results/). One compile (about 95 s and 4.7 GB here), cached in the user cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASE = "sm90-bf16-128x128x64-c1x1x1-none"
HARDWARE_REPORT = ROOT / "results" / "h200-2026-11-29" / "smoke-hardware.json"


@pytest.mark.slow
def test_virtual_sm90_verdict_matches_the_h200(tmp_path: Path) -> None:
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
            "matrices/smoke-sm90.yaml",
            "--tile-device",
            "virtual",
            "-k",
            CASE,
            "--tile-report",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (virtual,) = json.loads(report.read_text())["cases"]
    hardware = next(c for c in json.loads(HARDWARE_REPORT.read_text())["cases"] if c["id"] == CASE)
    assert virtual["outcome"] == "passed"
    verdict = virtual["verdict"]
    assert verdict["source"] == "virtual (sm90 profile)"
    assert verdict["judged_through"] == "launch"
    assert hardware["verdict"]["outcome"] == "pass"
    assert verdict["smem_requested"] == hardware["verdict"]["smem_requested"]
    assert verdict["smem_limit"] == 232448  # sm90 opt-in limit, CUDA guide / CUTLASS arch.h
    assert verdict["workspace_bytes"] == hardware["verdict"]["workspace_bytes"]
