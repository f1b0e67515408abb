"""Hostile matrix file names: a name with spaces, ``#``, a newline, brackets or ``::`` (``a::b.yaml``,
``m[0].yaml``) is a file like any other, and one matrix given several times is one matrix. Each
run files every verdict under its own case (the report names each case's coordinates, never
``case: null``), a failing case fails at its stage, ``--tile-update`` writes its expectation into
that file, and the node ids ``--collect-only`` prints select the cases they name."""

from __future__ import annotations

import json

import pytest
from helpers.fake_backend import BASIC, BASIC_IDS, TileRun, output

NAMES = [
    pytest.param("with space.yaml", id="space"),
    pytest.param("hash#tag.yaml", id="hash"),
    pytest.param("#start.yaml", id="leading-hash"),
    pytest.param("new\nline.yaml", id="newline"),
    pytest.param("m[0].yaml", id="brackets"),
    pytest.param("a::b.yaml", id="double-colon"),
    pytest.param("a::sm90-bf16-128x64x64-c1x1x1-none.yaml", id="a-case-id-after-colons"),
    pytest.param("[::] x#.yaml", id="all-of-them"),
    pytest.param("sub dir/m.yaml", id="space-in-folder"),
    pytest.param("sub::dir/m[1].yaml", id="colons-in-folder"),
]


@pytest.mark.parametrize("name", NAMES)
def test_verdicts_are_filed_under_their_cases(tc: TileRun, name: str) -> None:
    path = tc.matrix(BASIC, name)
    tc.verdicts({BASIC_IDS[0]: "initialize"})
    result = tc.run("--tile-report", "r.json", "--tile-update", matrix=name)
    result.assert_outcomes(passed=2, failed=1)
    assert "Traceback" not in output(result)
    cases = {c["id"]: c for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert sorted(cases) == sorted(BASIC_IDS)
    for entry in cases.values():
        assert entry["case"] is not None and entry["matrix"] == str(path)
    assert cases[BASIC_IDS[0]]["verdict"]["failed_stage"] == "initialize"
    # the expectation went into this file, and the next run agrees with it
    assert f"{BASIC_IDS[0]}: {{stage: initialize" in path.read_text()
    again = tc.run(matrix=name)
    again.assert_outcomes(passed=2, xfailed=1)


@pytest.mark.parametrize("name", NAMES)
def test_keyword_selects_a_case_and_nothing_else_is_collected(tc: TileRun, name: str) -> None:
    """Beside the matrix lie a Python test and another YAML file: neither is collected, whether
    pytest was given the matrix itself or, for a name it cannot take, its folder."""
    path = tc.matrix(BASIC, name)
    (path.parent / "test_beside.py").write_text("def test_beside():\n    pass\n")
    (path.parent / "other.yaml").write_text(BASIC)
    result = tc.run("-k", "128x128x64", "--tile-report", "r.json", matrix=name)
    result.assert_outcomes(passed=1, deselected=2)
    cases = json.loads((tc.path / "r.json").read_text())["cases"]
    assert [(c["id"], c["case"] is not None) for c in cases] == [(BASIC_IDS[1], True)]


def test_a_python_test_named_beside_an_odd_matrix_still_runs(tc: TileRun) -> None:
    tc.matrix(BASIC, "m[0].yaml")
    tc.pytester.makepyfile(test_beside="def test_beside():\n    pass\n")
    result = tc.run("test_beside.py", matrix="m[0].yaml")
    result.assert_outcomes(passed=4)


def test_one_matrix_given_three_times_is_one_matrix(tc: TileRun) -> None:
    tc.matrix(BASIC, "m.yaml")
    (tc.path / "sub").mkdir()
    tc.verdicts({BASIC_IDS[0]: "initialize"})
    result = tc.run(
        "--tile-matrix",
        "m.yaml",
        "--tile-matrix",
        "sub/../m.yaml",
        "--tile-report",
        "r.json",
        "--tile-update",
    )
    result.assert_outcomes(passed=2, failed=1)
    cases = json.loads((tc.path / "r.json").read_text())["cases"]
    assert sorted(c["id"] for c in cases) == sorted(BASIC_IDS)
    assert (tc.path / "m.yaml").read_text().count(BASIC_IDS[0]) == 1


def test_odd_names_under_xdist(tc: TileRun) -> None:
    pytest.importorskip("xdist")
    path = tc.matrix(BASIC, "a::b [0].yaml")
    tc.verdicts({BASIC_IDS[0]: "initialize"})
    result = tc.run_subprocess("-n", "2", "--tile-report", "r.json", matrix=path.name)
    result.assert_outcomes(passed=2, failed=1)
    cases = {c["id"]: c for c in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert sorted(cases) == sorted(BASIC_IDS)
    assert all(c["case"] is not None and c["worker"] for c in cases.values())
