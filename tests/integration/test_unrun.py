"""A pass whose kernel did not run (a virtual device stops at ``launch``) is ``unrun`` in every
output, never a bare pass; a hardware pass (judged through ``numerics``) stays ``pass``.

One run of the fake backend judges two cases: one as a GPU would (device hardware, through
numerics) and one as the virtual device does (device virtual, through launch). Each output of
that run, and of the commands reading its results file, must tell them apart.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_backend import TileRun, verbose_outcomes

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.store import parse_results, read_results

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    problems: {experts: 2, rows: 64, n: 256, k: 128}
    tile: [128x64x64, 128x128x64]
"""

GPU = "hardware (NVIDIA H200, CC 9.0)"
HARDWARE_CASE = "sm90-bf16-128x64x64-c1x1x1-none"
VIRTUAL_CASE = "sm90-bf16-128x128x64-c1x1x1-none"
VERDICTS = {
    HARDWARE_CASE: {
        "stage": "pass",
        "judged_through": "numerics",
        "source": GPU,
        "device": {"kind": "hardware", "name": "NVIDIA H200", "arch": "sm90", "cc": "9.0"},
        "smem": 215040,
        "limit": 232448,
    },
    VIRTUAL_CASE: {
        "stage": "pass",
        "judged_through": "launch",
        "source": "virtual (sm90 profile)",
        "device": {"kind": "virtual", "name": "virtual sm90", "arch": "sm90", "cc": "9.0"},
        "smem": 215040,
        "limit": 232448,
    },
}


def run(tc: TileRun, *args: str) -> pytest.RunResult:
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    return tc.run(*args)


@pytest.fixture
def report(tc: TileRun) -> Path:
    """The results file of the run."""
    result = run(tc, "--tile-report", "r.json")
    assert result.ret == 0, result.stdout.str()
    return tc.path / "r.json"


def test_terminal_word_letter_summary_and_exit_status(tc: TileRun) -> None:
    result = run(tc, "-v")
    assert verbose_outcomes(result) == {
        f"m.yaml::{HARDWARE_CASE}": "PASSED",
        f"m.yaml::{VIRTUAL_CASE}": "UNRUN",
    }
    assert result.parseoutcomes() == {"passed": 1, "unrun": 1}
    assert result.ret == 0  # judged as far as the device can: not a failure of the gate
    quiet = run(tc)
    quiet.stdout.fnmatch_lines(["m.yaml .u *"])  # pytest's progress letters


def test_terminal_grid_and_source_lines(tc: TileRun) -> None:
    result = run(tc)
    result.stdout.fnmatch_lines(
        [
            "arch  dtypes  128x64x64  128x128x64",
            "sm90  bf16    1.         1u        ",
            "",
            ". pass   u unrun: passed what was judged, the kernel did not run*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"1 case(s) judged by {GPU}, through numerics",
            "1 case(s) judged by virtual (sm90 profile), through launch; stages after launch were NOT "
            "judged: the kernel did not run, so 1 pass(es) are reported as unrun",
        ]
    )


def test_under_xdist(tc: TileRun) -> None:
    """Workers send their reports to the controller, which words them and writes the results."""
    tc.matrix(MATRIX)
    tc.verdicts(VERDICTS)
    result = tc.run_subprocess("-n", "2", "-v", "--tile-report", "r.json", "--junitxml", "j.xml", "-ru")
    assert result.parseoutcomes() == {"passed": 1, "unrun": 1}
    result.stdout.fnmatch_lines(
        [f"*UNRUN m.yaml::{VIRTUAL_CASE}*", f"UNRUN m.yaml::{VIRTUAL_CASE} - {UNRUN_REASON}"]
    )
    gitlab, _, counts = junit_viewers(tc.path / "j.xml")
    assert gitlab == {HARDWARE_CASE: "success", VIRTUAL_CASE: "skipped"} and counts["skipped"] == 1
    cases = {entry["id"]: entry["outcome"] for entry in json.loads((tc.path / "r.json").read_text())["cases"]}
    assert cases == {HARDWARE_CASE: "passed", VIRTUAL_CASE: "unrun"}


def test_require_run_fails_an_unrun_pass(tc: TileRun) -> None:
    result = run(tc, "--tile-require-run", "-rf")
    assert result.parseoutcomes() == {"passed": 1, "failed": 1}
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "expected pass, but unrun: judged through launch only, the kernel did not run "
            "(--tile-require-run fails such a case)",
            "  verdict: unrun (judged through launch) smem=215040/232448 [[]virtual (sm90 profile)[]]",
        ]
    )


def test_require_run_as_an_ini_key(tc: TileRun) -> None:
    tc.pytester.makeini("[pytest]\ntile_require_run = true\n")
    assert run(tc).parseoutcomes() == {"passed": 1, "failed": 1}
    tc.pytester.makeini("[pytest]\ntile_require_run = maybe\n")
    result = run(tc)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*tile_require_run = 'maybe' is not a valid value for --tile-require-run*"])


def test_the_marker_selects_before_anything_is_judged(tc: TileRun) -> None:
    """The backend says at collection which cases its device will not run, so ``-m`` can leave
    them out (or pick them) without judging them."""
    run(tc)  # writes the matrix and the verdicts table
    assert tc.collect("-m", "tileconform_unrun") == [f"m.yaml::{VIRTUAL_CASE}"]
    assert tc.collect("-m", "not tileconform_unrun") == [f"m.yaml::{HARDWARE_CASE}"]
    result = run(tc, "-m", "not tileconform_unrun")
    assert result.parseoutcomes() == {"passed": 1, "deselected": 1}
    assert (
        "tileconform_unrun: a tile matrix case whose device will not run the kernel"
        in run(tc, "--markers").stdout.str()
    )


def test_junit_properties(tc: TileRun) -> None:
    run(tc, "--junitxml", "j.xml")
    root = ET.parse(tc.path / "j.xml").getroot()
    found = {}
    for testcase in root.iter("testcase"):
        properties = {p.get("name"): p.get("value") for p in testcase.iter("property")}
        found[testcase.get("name")] = (properties["tileconform_outcome"], properties["kernel_ran"])
        assert properties["stage"] == "pass"  # the verdict's own word is unchanged
    assert found == {HARDWARE_CASE: ("pass", "true"), VIRTUAL_CASE: ("unrun", "false")}


UNRUN_REASON = (
    "unrun: passed every stage virtual (sm90 profile) judges (through launch); the kernel did not "
    "run and its output was not checked"
)


def gitlab_status(testcase: ET.Element) -> str:
    """A testcase's status as GitLab's JUnit parser decides it (``lib/gitlab/ci/parsers/test/
    junit.rb``, ``create_test_case``): a ``failure`` child, else ``error``, else ``skipped``,
    else success. Properties are not read."""
    for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if testcase.find(tag) is not None:
            return status
    return "success"


def junit_viewers(path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, int]]:
    """Each case as GitLab reads it, as ``junitparser`` reads it (the library
    EnricoMi/publish-unit-test-result-action, the example workflow's publisher, reads JUnit
    with), and the suite's counts."""
    from junitparser import JUnitXml

    gitlab = {str(t.get("name")): gitlab_status(t) for t in ET.parse(path).getroot().iter("testcase")}
    parsed = JUnitXml.fromfile(str(path))
    publisher: dict[str, str] = {}
    counts: dict[str, int] = {}
    for suite in parsed:
        counts = {"tests": suite.tests, "skipped": suite.skipped, "failures": suite.failures}
        for case in suite:
            publisher[case.name] = "skipped" if case.is_skipped else "passed" if case.is_passed else "failed"
    return gitlab, publisher, counts


def test_junit_viewers_count_an_unrun_case_as_skipped(tc: TileRun) -> None:
    """A JUnit viewer reads a testcase's children, never its properties: the unrun case has a
    ``<skipped>`` with the reason, so GitLab and the GitHub publishers count it skipped, not passed."""
    run(tc, "--junitxml", "j.xml")
    gitlab, publisher, counts = junit_viewers(tc.path / "j.xml")
    assert gitlab == {HARDWARE_CASE: "success", VIRTUAL_CASE: "skipped"}
    assert publisher == {HARDWARE_CASE: "passed", VIRTUAL_CASE: "skipped"}
    assert counts == {"tests": 2, "skipped": 1, "failures": 0}
    (testcase,) = [
        t for t in ET.parse(tc.path / "j.xml").getroot().iter("testcase") if t.get("name") == VIRTUAL_CASE
    ]
    (skipped,) = testcase.findall("skipped")
    assert skipped.get("type") == "tileconform.unrun" and skipped.get("message") == UNRUN_REASON
    assert skipped.text == "unrun (judged through launch) smem=215040/232448 [virtual (sm90 profile)]"


def test_junit_under_require_run_is_a_failure_only(tc: TileRun) -> None:
    """--tile-require-run fails the unrun case: a failure, not also a skip."""
    run(tc, "--tile-require-run", "--junitxml", "j.xml")
    gitlab, publisher, counts = junit_viewers(tc.path / "j.xml")
    assert gitlab == {HARDWARE_CASE: "success", VIRTUAL_CASE: "failed"}
    assert publisher == {HARDWARE_CASE: "passed", VIRTUAL_CASE: "failed"}
    assert counts == {"tests": 2, "skipped": 0, "failures": 1}


def test_short_summary_lists_unrun_cases(tc: TileRun) -> None:
    """``-rA`` (and ``-rp``) list passes, ``-ru`` the unrun cases alone; each names why."""
    everything = run(tc, "-rA")
    everything.stdout.fnmatch_lines(
        [
            "*= short test summary info =*",
            f"PASSED m.yaml::{HARDWARE_CASE}",
            f"UNRUN m.yaml::{VIRTUAL_CASE} - {UNRUN_REASON}",
        ]
    )
    alone = run(tc, "-ru")
    alone.stdout.fnmatch_lines(
        ["*= short test summary info =*", f"UNRUN m.yaml::{VIRTUAL_CASE} - {UNRUN_REASON}"]
    )
    assert "PASSED m.yaml" not in alone.stdout.str()
    quiet = run(tc, "-rfs")
    assert "UNRUN m.yaml" not in quiet.stdout.str() and "short test summary" not in quiet.stdout.str()


def test_results_file(report: Path) -> None:
    cases = {entry["id"]: entry for entry in json.loads(report.read_text())["cases"]}
    hardware, virtual = cases[HARDWARE_CASE], cases[VIRTUAL_CASE]
    assert (hardware["outcome"], hardware["verdict"]["kernel_ran"]) == ("passed", True)
    assert (virtual["outcome"], virtual["verdict"]["kernel_ran"]) == ("unrun", False)
    assert hardware["verdict"]["outcome"] == virtual["verdict"]["outcome"] == "pass"


def test_an_older_format_reads_as_unrun() -> None:
    """Format 2 had no kernel_ran and called a virtual pass 'passed': it is upgraded when read."""
    verdict = {
        "failed_stage": None,
        "judged_through": "launch",
        "source": "virtual (sm90 profile)",
        "outcome": "pass",
        "device": {"kind": "virtual", "name": "virtual sm90", "arch": "sm90", "cc": "9.0"},
    }
    document = parse_results(
        {"format": 2, "cases": [{"id": "c", "outcome": "passed", "case": None, "verdict": verdict}]}
    )
    (entry,) = document.cases
    assert entry.outcome == "unrun" and entry.verdict is not None
    assert entry.verdict.kernel_ran is False and entry.verdict.reported == "unrun"


def test_kernel_ran_must_follow_judged_through(report: Path, tmp_path: Path) -> None:
    data = json.loads(report.read_text())
    data["cases"][1]["verdict"]["kernel_ran"] = True  # the virtual case claims a run
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="kernel_ran true contradicts judged_through 'launch'"):
        read_results(bad)


def test_merged_markdown_and_html(report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md, page = tmp_path / "m.md", tmp_path / "m.html"
    assert main(["report", "merge", str(report), "-o", str(md), "--html", str(page)]) == 0
    text = md.read_text()
    assert "2 verdict(s): 1 pass, 1 unrun." in text
    assert "| D1 NVIDIA H200 | pass 1/1 · 215,040 B | - |" in text
    assert "| D2 virtual sm90 | - | unrun 1/1 (through launch) · 215,040 B |" in text
    assert "unrun: expected to pass, passed every stage judged, but the kernel did not run" in text
    html = page.read_text()
    assert '<td class="pass"' in html and '<td class="unrun"' in html
    assert "unrun 1/1<br>through launch" in html


def test_diff_and_compare(report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The case a GPU passed, judged again on the virtual device only: a change in the diff, never
    'unchanged'; and compare, between two runs of one device, names an unrun pass as such."""
    data = json.loads(report.read_text())
    virtual_verdict = data["cases"][1]["verdict"]
    data["cases"][0].update(outcome="unrun", verdict=virtual_verdict)
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    assert main(["report", "diff", str(report), str(new)]) == 0
    assert f"| `{HARDWARE_CASE}` | pass | pass | unrun (through launch) |" in capsys.readouterr().out
    data["cases"][1].update(
        outcome="failed",
        verdict={**virtual_verdict, "failed_stage": "launch", "outcome": "launch", "status": "refused"},
    )
    rejected = tmp_path / "rejected.json"
    rejected.write_text(json.dumps(data))
    assert main(["report", "compare", str(new), str(rejected)]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith(f"DISAGREE {VIRTUAL_CASE}: "))
    assert "new.json outcome='unrun' failed_stage=None" in line
    assert "rejected.json outcome='launch' failed_stage='launch'" in line


TACTICS = [
    {
        "sm": 90,
        "runner": "bf16",
        "gemm": 1,
        "tactic": number,
        "config_sm": 90,
        "tma_ws": True,
        "tile_bytes": [128, n, 128],
        "cluster": [1, 1, 1],
        "fusion": "none",
        "swap_ab": False,
        "dispatch": "accepted",
        "instantiation": {
            "arch": 90,
            "tile": [128, n, 64],
            "cluster": [1, 1, 1],
            "fusion": "none",
            "swap_ab": False,
            "dynamic_cga": False,
            "epilogue_schedule": "void",
        },
    }
    for number, n in enumerate((64, 128))
]


def _blocklist(report: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    tactics = tmp_path / "tactics.jsonl"
    tactics.write_text("".join(json.dumps(t) + "\n" for t in TACTICS))
    out = tmp_path / "blocklist.json"
    argv = ["export-blocklist", "--arch", "sm90", str(report), "--tactics", str(tactics), "-o", str(out)]
    assert main([*argv, *extra]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_blocklist_does_not_call_an_unrun_case_good(
    report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing failed, so nothing is blocked; the tactic that passed only on the virtual device is
    named as not known to work on the GPU, the one a GPU ran is not."""
    document = _blocklist(report, tmp_path, "--accept-virtual")
    assert document["invalid_tactics"] == {}
    assert document["_metadata"]["tileconform"]["unrun"] == [
        {"dtypes": "bf16", "case_ids": [VIRTUAL_CASE], "tactics": [1]}
    ]
    err = capsys.readouterr().err
    assert (
        "1 configuration(s) (1 tactic(s)) passed only without their kernel running (unrun): not "
        "blocked, and NOT known to work on NVIDIA H200" in err
    )
    # without --accept-virtual the virtual verdict is not used at all, and still not called good
    document = _blocklist(report, tmp_path)
    assert document["_metadata"]["tileconform"]["unrun"] == []
    assert "1 virtual-device verdict(s) for sm90 not used" in capsys.readouterr().err
