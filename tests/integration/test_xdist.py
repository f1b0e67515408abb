"""Running under pytest-xdist: same outcomes, one report, updates written once, GPU pinning."""

from __future__ import annotations

import json

import pytest
from helpers.fake_backend import TileRun
from helpers.fake_matrices import OBSERVED, ORIGINAL, OUTCOMES_MATRIX, OUTCOMES_VERDICTS, UPDATED


def test_outcomes_and_report_under_xdist(tc: TileRun) -> None:
    tc.matrix(OUTCOMES_MATRIX)
    tc.verdicts(OUTCOMES_VERDICTS)
    result = tc.run_subprocess("-n", "2", "--tile-report", "r.json")
    result.assert_outcomes(passed=1, failed=3, xfailed=2, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "created: 2/2 workers",
            "*= tileconform verdicts (tiles: CTA MxNxK, K in elements) =*",
            "arch   dtypes  64x64x64  64x128x64  128x64x64  128x128x64  128x256x64  256x128x64  256x256x64",
            "sm90   bf16    1.        1x         1F         1x          1F          1F          1s        ",
            "sm100  bf16    1s *",
        ]
    )
    cases = json.loads((tc.path / "r.json").read_text())["cases"]
    assert len(cases) == 8
    assert sorted((c["id"], c["outcome"]) for c in cases) == sorted(
        [
            ("sm90-bf16-64x64x64-c1x1x1-none", "passed"),
            ("sm90-bf16-128x64x64-c1x1x1-none", "failed"),
            ("sm90-bf16-128x128x64-c1x1x1-none", "xfailed"),
            ("sm90-bf16-128x256x64-c1x1x1-none", "failed"),
            ("sm90-bf16-256x128x64-c1x1x1-none", "failed"),
            ("sm90-bf16-256x256x64-c1x1x1-none", "skipped"),
            ("sm90-bf16-64x128x64-c1x1x1-none", "xfailed"),
            ("sm100-bf16-64x64x64-c1x1x1-none", "skipped"),
        ]
    )
    judged = [c for c in cases if c["verdict"] is not None]
    assert len(judged) == 7
    assert {c["verdict"]["extra"]["worker"] for c in judged} <= {"gw0", "gw1"}
    assert {c["worker"] for c in cases} <= {"gw0", "gw1"}  # the report names each case's worker


def test_tile_update_under_xdist(tc: TileRun) -> None:
    path = tc.matrix(ORIGINAL)
    tc.verdicts(OBSERVED)
    result = tc.run_subprocess("-n", "2", "--tile-update")
    result.assert_outcomes(failed=3, xfailed=1)
    result.stdout.fnmatch_lines([f"{path}: 3 expectation(s) updated"])
    assert path.read_text() == UPDATED
    assert sorted(p.name for p in tc.path.glob(".m.yaml*")) == []


def test_auto_workers_one_per_gpu_and_pinned(tc: TileRun, monkeypatch: pytest.MonkeyPatch) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - arch: sm90
            dtype: [bf16, fp16]
            tile: [64x64x64, 128x64x64, 128x128x64, 256x128x64]
            problems: {experts: 2, rows: 64, n: 256, k: 128}
        """
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    result = tc.run_subprocess("-n", "auto", "--tile-report", "r.json")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["created: 2/2 workers"])
    cases = json.loads((tc.path / "r.json").read_text())["cases"]
    pinned = {(c["verdict"]["extra"]["worker"], c["verdict"]["extra"]["cuda_visible_devices"]) for c in cases}
    assert pinned == {("gw0", "3"), ("gw1", "5")}
    assert {c["worker"] for c in cases} == {"gw0", "gw1"}


def test_auto_workers_follow_gpus_whatever_the_plugin_order(
    tc: TileRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU runner without the package installed, ``-p`` registers the plugin before xdist's
    entry point; xdist's CPU-count answer must still not win (seen on an H200x2 host)."""
    tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - {arch: sm90, dtype: bf16, tile: [64x64x64], problems: {experts: 1, rows: 8, n: 64, k: 64}}
        """
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "7")  # what xdist alone would answer
    result = tc.run_subprocess(
        "-p", "pytest_tileconform.plugin", "-p", "xdist.plugin", "-p", "xdist.looponfail", "-n", "auto"
    )
    result.stdout.fnmatch_lines(["created: 3/3 workers"])
