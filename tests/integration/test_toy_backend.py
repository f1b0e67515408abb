"""A third backend, written as a plugin of its own, goes through the whole flow without any edit to
the core: its own matrix axes (pipeline stages, raster order), its own option, a command of its
own, and a column of its own in ``report merge``; its cases are collected, judged, recorded by
``--tile-update``, written to the results file, merged and diffed.

The toy judges a tile by the shared memory its stages would ask for (M x N x stages bytes) against
``--toy-smem``: what a CUTLASS kernel's ``initialize`` refuses, without a compiler.
"""

from __future__ import annotations

import importlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from pytest_tileconform.commands.cli import main

TOY_PLUGIN = """
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import StrictInt

from pytest_tileconform import Stage, Verdict
from pytest_tileconform.matrix.kinds import CaseKind
from pytest_tileconform.matrix.schema import ListOf, Strict
from pytest_tileconform.results.fingerprint import HostColumn
from pytest_tileconform.results.merge import CaseNote
from pytest_tileconform.verdict import Device

NAME = "toy"


class ToyMatrixAxes(Strict):
    stages: Annotated[list[StrictInt], ListOf] | None = None
    raster: Annotated[list[Literal["along_m", "along_n"]], ListOf] | None = None


@dataclass(frozen=True)
class ToyAxes:
    stages: int
    raster: str

    def id_words(self) -> list[str]:
        return [f"s{self.stages}", self.raster]

    def describe(self) -> dict[str, Any]:
        return {"stages": self.stages, "raster": self.raster}

    def record(self) -> dict[str, Any]:
        return self.describe()

    def properties(self) -> list[tuple[str, str]]:
        return [("stages", str(self.stages)), ("raster", self.raster)]


KIND = CaseKind(
    backend=NAME,
    axes=ToyMatrixAxes,
    defaults={"stages": None, "raster": ["along_m"]},
    make=ToyAxes,
    id_pattern="sSTAGES-RASTER",
)


class ToyBackend:
    name = NAME

    def __init__(self, smem: int) -> None:
        self.smem = smem

    def prepare(self, cases: Any) -> None:
        pass

    def judge(self, case: Any) -> Verdict:
        asked = case.tile[0] * case.tile[1] * case.axes.stages
        refused = asked > self.smem
        return Verdict(
            failed_stage=Stage.INITIALIZE if refused else None,
            judged_through=Stage.NUMERICS,
            source="toy",
            status="Error Internal" if refused else "",
            smem_requested=asked,
            smem_limit=self.smem,
            device=Device(kind="hardware", name="Toy GPU", arch=case.arch, cc="9.0"),
        )


def pytest_addoption(parser: Any) -> None:
    parser.getgroup("toy").addoption("--toy-smem", type=int, default=100_000, help="the toy's smem")


def pytest_tileconform_case_kinds() -> list[CaseKind]:
    return [KIND]


def pytest_tileconform_register_backends(config: Any, options: Any) -> list[ToyBackend]:
    return [ToyBackend(config.getoption("toy_smem"))]


def pytest_tileconform_host_fingerprint(config: Any) -> dict[str, Any]:
    return {"toy_version": "1.2"}


def pytest_tileconform_host_columns() -> list[HostColumn]:
    return [HostColumn("toy_version", "toy")]


def pytest_tileconform_add_merge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--toy-stages", action="store_true")


def pytest_tileconform_merge_note(args: argparse.Namespace) -> CaseNote | None:
    if not args.toy_stages:
        return None
    return CaseNote("stages", lambda record: f"{record.coordinates()['stages']} stages")


def _count(args: argparse.Namespace) -> int:
    from pytest_tileconform.matrix.load import load_matrix

    for case in load_matrix(Path(args.matrix), {NAME: KIND}).cases:
        print(case.id, case.axes.stages)
    return 0


def pytest_tileconform_add_commands(subparsers: Any) -> None:
    count = subparsers.add_parser("toy-cases", help="the toy's cases and their stages")
    count.add_argument("matrix")
    count.set_defaults(handler=_count)
"""

MATRIX = """\
version: 1
backend: toy
suites:
  - arch: sm90
    dtype: bf16
    stages: [2, 4]
    tile: [128x128x64, 256x128x64]
  - arch: sm90
    dtype: fp16
    raster: along_n
    tile: [{shape: 64x64x64, stages: 3}]
"""

IDS = [
    "sm90-bf16-128x128x64-s2-along_m",
    "sm90-bf16-128x128x64-s4-along_m",
    "sm90-bf16-256x128x64-s2-along_m",
    "sm90-bf16-256x128x64-s4-along_m",
    "sm90-fp16-64x64x64-s3-along_n",
]
#: 256 x 128 x 4 = 131,072 bytes: the one case over the toy's 70,000
REFUSED = "sm90-bf16-256x128x64-s4-along_m"


@pytest.fixture
def toy(pytester: pytest.Pytester) -> ModuleType:
    """The toy plugin as a module of the pytester folder, for pytest (``-p toy_plugin``) and the
    command line (``main(plugins=[...])``) alike."""
    pytester.makepyfile(toy_plugin=TOY_PLUGIN)
    pytester.syspathinsert()
    (pytester.path / "toy.yaml").write_text(MATRIX)
    return importlib.import_module("toy_plugin")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "toy_plugin", "--tile-matrix", "toy.yaml", "--toy-smem", "70000", *args
    )


def _cases(path: Path) -> dict[str, dict[str, object]]:
    return {entry["id"]: entry for entry in json.loads(path.read_text())["cases"]}


def test_a_third_backend_goes_through_the_whole_flow(
    pytester: pytest.Pytester,
    toy: ModuleType,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as a user runs it at their desk: under CI, --tile-update refuses to rewrite matrices
    monkeypatch.delenv("CI", raising=False)
    # collection: the toy's axes multiply as the matrix says, its words name the cases
    collected = pytester.runpytest_subprocess(
        "-p", "toy_plugin", "--tile-matrix", "toy.yaml", "--collect-only", "-q"
    )
    assert [line.split("::")[1] for line in collected.outlines if "::" in line] == IDS
    # judging with the toy's own option: one case is refused at initialize, a regression
    first = _run(pytester, "--tile-report", "first.json")
    assert first.ret == 1 and first.parseoutcomes() == {"passed": 4, "failed": 1}
    # --tile-update records it in the matrix; the next run expects it
    assert _run(pytester, "--tile-update").ret == 0  # every failure recorded
    matrix = (pytester.path / "toy.yaml").read_text()
    assert f"{REFUSED}: {{stage: initialize" in matrix and "Error Internal" in matrix
    second = _run(pytester, "--tile-report", "second.json", "--junitxml", "j.xml")
    assert second.ret == 0 and second.parseoutcomes() == {"passed": 4, "xfailed": 1}
    # the results file carries the toy's coordinates as the toy wrote them; JUnit its properties
    recorded = _cases(pytester.path / "second.json")
    assert recorded[REFUSED]["case"] == {
        "arch": "sm90",
        "act": "bf16",
        "weight": "bf16",
        "out": "bf16",
        "tile": "256x128x64",
        "stages": 4,
        "raster": "along_m",
    }
    assert recorded[REFUSED]["expected"] == "initialize"
    junit = ET.parse(pytester.path / "j.xml").getroot()
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in junit.iter("testcase")
    }
    assert props[REFUSED]["stages"] == "4" and props[REFUSED]["raster"] == "along_m"
    # merge: the toy's device column and its note, read from its own record
    first_json, second_json = str(pytester.path / "first.json"), str(pytester.path / "second.json")
    assert main(["report", "merge", second_json, "--toy-stages"], plugins=[toy]) == 0
    merged = capsys.readouterr().out
    header = next(line for line in merged.splitlines() if line.startswith("| row | device"))
    assert "| toy |" in header
    assert "| 1.2 |" in merged
    note = next(line for line in merged.splitlines() if f"`{REFUSED}`" in line)
    assert note.rstrip(" |").endswith("4 stages")
    # diff: the regression of the first run is known-bad in the second, and back again is new
    assert main(["report", "diff", first_json, second_json]) == 0
    assert main(["report", "diff", second_json, first_json]) == 1
    assert REFUSED in capsys.readouterr().out
    # the toy's command, beside the core's
    assert main(["toy-cases", str(pytester.path / "toy.yaml")], plugins=[toy]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{i} {i.split('-')[3][1:]}" for i in IDS]
