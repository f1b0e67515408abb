"""A fake tileconform backend for the plugin's own tests, and helpers to drive pytest with it.

``FAKE_CONFTEST`` is the ``conftest.py`` each pytester run gets. Its backend, named ``fake``,
takes its verdicts from ``verdicts.json`` next to the conftest: a mapping case id -> outcome,
either a stage name (``"initialize"``) or a mapping with ``stage`` and optionally
``judged_through``, ``status``, ``smem``, ``limit``, ``detail``, ``source`` and ``device`` (the
fields of ``Device``). Its messages may quote files under ``sources/`` next to the conftest,
which it names ``<fake-sources>`` (``places``). Cases not in the table pass. Only sm90 is
"present": any other arch raises NotJudgeable. An entry's ``judged_through`` is also what the
backend promises at collection (its ``judged_through`` method), as a virtual device knows it
will stop at launch.

Every ``prepare`` call and every verdict (through the ``pytest_tileconform_verdict`` hook) is
appended as one JSON line to ``prepared.jsonl`` / ``verdicts.jsonl``.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.flashinfer.axes import KIND, KINDS
from pytest_tileconform.flashinfer_dense.axes import KIND as DENSE_KIND
from pytest_tileconform.matrix.kinds import CaseKind

#: What the fake backend declares of its cases: FlashInfer's axes under its own name (its
#: matrices are written as FlashInfer's are); the conftest below declares the same.
FAKE_KINDS: dict[str, CaseKind] = {"fake": replace(KIND, backend="fake")}
#: The fake backend's and FlashInfer's (MoE and dense), for tests that read matrices of any without pytest
TEST_KINDS: dict[str, CaseKind] = {**KINDS, DENSE_KIND.backend: DENSE_KIND, **FAKE_KINDS}


class FakeKinds:
    """The fake backend's kinds as a plugin of the ``tileconform`` command line
    (``main(plugins=[FakeKinds()])``), which reads its matrices without its conftest."""

    def pytest_tileconform_case_kinds(self) -> list[CaseKind]:
        return list(FAKE_KINDS.values())


FAKE_CONFTEST = """
import json
import os
from dataclasses import replace
from pathlib import Path

from pytest_tileconform import NotJudgeable, Stage, Verdict
from pytest_tileconform.flashinfer.axes import KIND
from pytest_tileconform.verdict import Device

HERE = Path(__file__).parent
PRESENT = "sm90"


def _log(name, record):
    with open(HERE / name, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\\n")


class FakeBackend:
    name = "fake"

    def places(self):
        return {"<fake-sources>": HERE / "sources"}

    def prepare(self, cases):
        _log("prepared.jsonl", {
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "ids": [c.id for c in cases],
        })

    def judge(self, case):
        if case.arch != PRESENT:
            raise NotJudgeable(f"{case.arch} is not present (found {PRESENT})")
        entry = _table().get(case.id, "pass")
        if isinstance(entry, str):
            entry = {"stage": entry}
        stage = entry.get("stage", "pass")
        return Verdict(
            failed_stage=None if stage == "pass" else Stage(stage),
            judged_through=Stage(entry.get("judged_through", "numerics")),
            source=entry.get("source", "fake"),
            status=entry.get("status", ""),
            detail=entry.get("detail", ""),
            smem_requested=entry.get("smem"),
            smem_limit=entry.get("limit"),
            device=Device(**entry["device"]) if "device" in entry else None,
            extra={
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            },
        )

    def judged_through(self, case):
        try:
            entry = _table().get(case.id)
        except ValueError:  # a broken table fails the cases when they are judged, not the collection
            return None
        if isinstance(entry, dict) and "judged_through" in entry:
            return Stage(entry["judged_through"])
        return None


def _table():
    table_path = HERE / "verdicts.json"
    return json.loads(table_path.read_text()) if table_path.exists() else {}


def pytest_tileconform_case_kinds():
    return [replace(KIND, backend="fake")]


def pytest_tileconform_register_backends(config):
    return [FakeBackend()]


def pytest_tileconform_verdict(config, case, verdict):
    _log("verdicts.jsonl", {"id": case.id, "outcome": verdict.outcome})
"""

#: A small valid matrix: three sm90 bf16 tiles, one unnamed problem.
BASIC = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""

BASIC_IDS = [
    "sm90-bf16-128x64x64-c1x1x1-none",
    "sm90-bf16-128x128x64-c1x1x1-none",
    "sm90-bf16-256x128x64-c1x1x1-none",
]

#: In-process runs import the already-imported plugin again; pytest warns it cannot rewrite it.
QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning")

NODE_ID = re.compile(r"^\S+\.yaml::\S+$")


class TileRun:
    """A pytester directory set up with the fake backend, and ways to run pytest in it."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path
        pytester.makeconftest(FAKE_CONFTEST)

    def matrix(self, text: str, name: str = "m.yaml") -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def verdicts(self, table: dict[str, Any]) -> None:
        (self.path / "verdicts.json").write_text(json.dumps(table), encoding="utf-8")

    def run(self, *args: str, matrix: str | None = "m.yaml") -> pytest.RunResult:
        """pytest in-process with ``--tile-matrix matrix`` (None: no --tile-matrix)."""
        head = ("--tile-matrix", matrix) if matrix else ()
        return self.pytester.runpytest(*head, *QUIET, *args)

    def run_subprocess(self, *args: str, matrix: str | None = "m.yaml") -> pytest.RunResult:
        head = ("--tile-matrix", matrix) if matrix else ()
        return self.pytester.runpytest_subprocess(*head, *QUIET, *args)

    def collect(self, *args: str, matrix: str | None = "m.yaml") -> list[str]:
        """The node ids ``--collect-only -q`` lists, in order."""
        result = self.run("--collect-only", "-q", *args, matrix=matrix)
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        return [line for line in result.outlines if NODE_ID.match(line)]

    def log(self, name: str) -> list[dict[str, Any]]:
        path = self.path / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


VERBOSE_LINE = re.compile(r"^(\S+\.yaml::\S+) (PASSED|UNRUN|FAILED|SKIPPED|XFAIL|XPASS|ERROR)\b")


def verbose_outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id -> PASSED/UNRUN/FAILED/SKIPPED/XFAIL/... from the lines of a ``-v`` run."""
    found = {}
    for line in result.outlines:
        match = VERBOSE_LINE.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def matrix_errors(result: pytest.RunResult, path: Path) -> list[str]:
    """The ``LINE:COL: message`` errors reported for the matrix at ``path``, in output order.

    Also checks the run was refused as a usage error without a traceback.
    """
    assert result.ret == 4, output(result)
    assert "Traceback" not in output(result)
    prefix = f"{path}:"
    return [line.removeprefix(prefix) for line in result.errlines if line.startswith(prefix)]
