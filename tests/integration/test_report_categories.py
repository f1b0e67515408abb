"""report merge and report diff on results files of real pytest runs: every category, as pytest
recorded the outcome (a strict XPASS is pytest's 'failed'), in the table, its legend and the diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.fake_backend import TileRun

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.category import Category, category_of
from pytest_tileconform.results.merge import merge, to_markdown
from pytest_tileconform.results.merge_html import to_html
from pytest_tileconform.results.store import read_results

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64]
    fusion: [none, finalize]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
  - arch: sm100
    dtype: bf16
    tile: [128x128x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
expectations:
  sm90-bf16-256x128x64-c1x1x1-finalize: {stage: initialize}
  sm90-bf16-128x128x64-c1x1x1-finalize: {stage: initialize}
  sm90-bf16-128x64x64-c1x1x1-finalize: {stage: initialize}
  sm90-bf16-128x64x64-c1x1x1-none: {stage: run}
"""

#: "virtual": judged through launch, as a virtual device judges
VIRTUAL = {"judged_through": "launch", "source": "virtual (sm90 profile)"}
VERDICTS: dict[str, Any] = {
    # expected initialize, rejected there: known-bad (xfailed)
    "sm90-bf16-256x128x64-c1x1x1-finalize": {
        "stage": "initialize",
        "status": "Error Internal",
        "smem": 240000,
        "limit": 232448,
    },
    # expected initialize, passed: XPASS(strict), which pytest records as failed
    "sm90-bf16-128x128x64-c1x1x1-finalize": {"stage": "pass", **VIRTUAL},
    # expected initialize, rejected at can_implement: a regression
    "sm90-bf16-128x64x64-c1x1x1-finalize": {"stage": "can_implement", "status": "Invalid"},
    # expected run, passed through launch: the expected stage was never reached, skipped
    "sm90-bf16-128x64x64-c1x1x1-none": {"stage": "pass", **VIRTUAL},
    # expected pass, rejected: a regression
    "sm90-bf16-256x128x64-c1x1x1-none": {"stage": "initialize", "smem": 240000, "limit": 232448},
}
#: the sm100 case is skipped without a verdict (the fake backend has only sm90)
CATEGORIES = {
    "sm90-bf16-256x128x64-c1x1x1-finalize": ("xfailed", Category.KNOWN_BAD),
    "sm90-bf16-128x128x64-c1x1x1-finalize": ("failed", Category.FIXED),
    "sm90-bf16-128x64x64-c1x1x1-finalize": ("failed", Category.REGRESSION),
    "sm90-bf16-128x64x64-c1x1x1-none": ("skipped", Category.NOT_JUDGED),
    "sm90-bf16-256x128x64-c1x1x1-none": ("failed", Category.REGRESSION),
    "sm90-bf16-128x128x64-c1x1x1-none": ("passed", Category.PASS),
    "sm100-bf16-128x128x64-c1x1x1-none": ("skipped", Category.NOT_JUDGED),
}


def _run(tc: TileRun, name: str, verdicts: dict[str, Any], matrix: str = MATRIX) -> Path:
    tc.matrix(matrix)
    tc.verdicts(verdicts)
    path = tc.path / name
    result = tc.run("--tile-report", str(path))
    assert path.is_file(), result.stdout.str()
    return path


@pytest.fixture
def mixed(tc: TileRun) -> tuple[TileRun, Path]:
    return tc, _run(tc, "mixed.json", VERDICTS)


def test_pytest_outcomes_become_categories(mixed: tuple[TileRun, Path]) -> None:
    document = read_results(mixed[1])
    found = {entry.id: (entry.outcome, category_of(entry)) for entry in document.cases}
    assert found == CATEGORIES


def test_merged_cells_show_outcome_against_expectation(mixed: tuple[TileRun, Path]) -> None:
    merged = merge([mixed[1]])
    text = to_markdown(merged)
    # the fake backend's verdicts name no device: one row; a cell holds fusion none and finalize
    table = text.split("## sm90 · bf16", 1)[1].split("## ", 1)[0]
    assert table.count("| D1 build only |") == 1
    assert "**regression 1/2** (can_implement, expected initialize, Invalid)" in table
    assert "not judged 1/2 (expected run, judged through launch)" in table
    assert "known-bad 1/2 (initialize, Error Internal, 240,000 B > 232,448)" in table
    assert "**regression 1/2** (initialize, expected pass, 240,000 B > 232,448)" in table
    assert "pass 1/2 · **fixed 1/2†** (expected initialize, passed)" in table
    # the legend under the table names every category and the mark it uses
    legend = next(line for line in table.splitlines() if line.startswith("Legend: "))
    for term in (
        "pass:",
        "known-bad:",
        "**fixed**:",
        "**regression**:",
        "not judged:",
        "†: judged through launch",
    ):
        assert term in legend
    assert "1 case(s) without a verdict are not in the tables (1 skipped)" in text
    assert "6 verdict(s): 1 pass, 1 known-bad, 1 fixed, 2 regression, 1 not judged" in text
    notable = text.split("## Cases other than pass and unrun", 1)[1]
    order = [line.split(" | ")[2] for line in notable.splitlines() if line.startswith("| D")]
    assert order == ["regression", "regression", "fixed†", "known-bad", "not judged"]


def test_html_colours_cells_by_what_needs_a_look(mixed: tuple[TileRun, Path]) -> None:
    page = to_html(merge([mixed[1]]))
    # the cell with a regression and a known-bad case is red, the one with a fix blue
    assert page.count('<td class="regression"') == 2 and page.count('<td class="fixed"') == 1
    assert '<b class="fixed">fixed 1/2†</b>' in page
    assert page.count('<p class="legend">') == 1 + 1  # the page's, and one under the one table
    assert "expected initialize, verdict unrun" in page  # a hover lists its cases; a virtual fix is unrun


def test_xpass_is_not_shown_as_a_pass(tc: TileRun) -> None:
    """The XPASS(strict) run fails pytest (rc 1); the table must not read 'pass 1/1'."""
    matrix = MATRIX.split("  - arch: sm100")[0] + (
        "expectations:\n  sm90-bf16-128x128x64-c1x1x1-none: {stage: initialize}\n"
    )
    tc.matrix(matrix)
    path = tc.path / "xpass.json"
    result = tc.run("-k", "128x128x64-c1x1x1-none", "--tile-report", str(path))
    assert result.ret == 1
    text = to_markdown(merge([path]))
    assert "pass 1/1" not in text
    assert "**fixed 1/1** (expected initialize, passed)" in text


def _diff(capsys: pytest.CaptureFixture[str], old: Path, new: Path, *more: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what the in-process pytest runs printed
    status = main(["report", "diff", str(old), str(new), *more])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _section(text: str, heading: str) -> list[str]:
    """The table rows under a '## heading (N)' section."""
    if f"## {heading} (" not in text:
        return []
    body = text.split(f"## {heading} (", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line.startswith("| `")]


def test_diff_against_a_clean_baseline(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    clean = {  # every case as its matrix expects: the known-bad ones rejected where expected
        "sm90-bf16-256x128x64-c1x1x1-finalize": VERDICTS["sm90-bf16-256x128x64-c1x1x1-finalize"],
        "sm90-bf16-128x128x64-c1x1x1-finalize": "initialize",
        "sm90-bf16-128x64x64-c1x1x1-finalize": "initialize",
        "sm90-bf16-128x64x64-c1x1x1-none": "run",
    }
    baseline = _run(tc, "old.json", clean)
    new = _run(tc, "new.json", VERDICTS)
    status, out, err = _diff(capsys, baseline, new)
    assert status == 1
    assert "2 new regression(s) in" in err
    assert _section(out, "New regressions") == [
        "| `sm90-bf16-128x64x64-c1x1x1-finalize` | initialize | known-bad: initialize "
        "| **regression: can_implement (Invalid)** |",
        "| `sm90-bf16-256x128x64-c1x1x1-none` | pass | pass | "
        "**regression: initialize (240,000 B > 232,448)** |",
    ]
    assert _section(out, "Fixes") == [
        "| `sm90-bf16-128x128x64-c1x1x1-finalize` | initialize | known-bad: initialize | **fixed†: unrun** |"
    ]
    assert _section(out, "Newly not judged") == [
        "| `sm90-bf16-128x64x64-c1x1x1-none` | run | known-bad: run | not judged: expected to fail at run, "
        "which virtual (sm90 profile) cannot judge (it judges through lau… |"
    ]
    assert "**2 new regression(s)** · 1 fix(es) · 0 changed · 1 newly not judged" in out
    assert "- †: judged through launch only (virtual device): the kernel did not run" in out
    # the other way round: nothing regressed; a regression that now passes is fixed, one that now
    # fails at its expected stage is not (the tile still fails): its verdict changed
    status, out, _ = _diff(capsys, new, baseline)
    assert status == 0
    assert not _section(out, "New regressions")
    assert [row.split(" | ")[0] for row in _section(out, "Fixes")] == ["| `sm90-bf16-256x128x64-c1x1x1-none`"]
    assert _section(out, "Changed verdict or expectation")[0] == (
        "| `sm90-bf16-128x128x64-c1x1x1-finalize` | initialize | fixed†: unrun | known-bad: initialize |"
    )
    assert (
        "| `sm90-bf16-128x64x64-c1x1x1-finalize` | initialize | regression: can_implement (Invalid) " in out
    )


def test_diff_gates_only_on_regressions_old_did_not_have(
    tc: TileRun, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = _run(tc, "old.json", VERDICTS)
    changed = dict(VERDICTS)
    changed["sm90-bf16-256x128x64-c1x1x1-none"] = {"stage": "can_implement"}  # still a regression
    changed["sm90-bf16-256x128x64-c1x1x1-finalize"] = "compile"  # known-bad -> regression
    new = _run(tc, "new.json", changed)
    output = tmp_path / "diff.md"
    status, out, _ = _diff(capsys, old, new, "-o", str(output))
    assert status == 1 and out == ""
    text = output.read_text()
    assert [row.split(" | ")[0] for row in _section(text, "New regressions")] == [
        "| `sm90-bf16-256x128x64-c1x1x1-finalize`"
    ]
    assert _section(text, "Regressions in both runs") == [
        "| `sm90-bf16-128x64x64-c1x1x1-finalize` | initialize | regression: can_implement (Invalid) "
        "| regression: can_implement (Invalid) |",
        "| `sm90-bf16-256x128x64-c1x1x1-none` | pass | regression: initialize (240,000 B > 232,448) "
        "| regression: can_implement |",
    ]
    # the same run against itself: nothing changed, nothing gates
    status, out, _ = _diff(capsys, new, new)
    assert status == 0
    assert "No case changed its category, verdict, status or expectation." in out
    assert "0 new regression(s)" in out and "3 regression(s) in both" in out and "4 unchanged" in out


def test_diff_added_removed_and_repeated_ids(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    """One id judged in two matrices is two cases, keyed by matrix file name, as compare keys them."""
    small = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x128x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""
    wider = small.replace("[128x128x64]", "[128x128x64, 256x128x64]")
    tc.matrix(small, "a.yaml")
    tc.matrix(small, "b.yaml")
    tc.verdicts({})
    old = tc.path / "old.json"
    tc.run("--tile-matrix", "b.yaml", "--tile-report", str(old), matrix="a.yaml")
    tc.matrix(wider, "b.yaml")
    tc.verdicts({"sm90-bf16-128x128x64-c1x1x1-none": "initialize"})
    new = tc.path / "new.json"
    tc.run("--tile-matrix", "b.yaml", "--tile-report", str(new), matrix="a.yaml")
    status, out, _ = _diff(capsys, old, new)
    assert status == 1
    assert [row.split(" | ")[0] for row in _section(out, "New regressions")] == [
        "| `a.yaml::sm90-bf16-128x128x64-c1x1x1-none`",
        "| `b.yaml::sm90-bf16-128x128x64-c1x1x1-none`",
    ]
    assert _section(out, "Added") == ["| `sm90-bf16-256x128x64-c1x1x1-none` | pass | — | pass |"]
    status, out, _ = _diff(capsys, new, old)
    assert _section(out, "Removed") == ["| `sm90-bf16-256x128x64-c1x1x1-none` | pass | pass | — |"]


def test_diff_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mixed: tuple[TileRun, Path]
) -> None:
    (tmp_path / "bad.json").write_text('{"format": 2}')
    status, out, err = _diff(capsys, tmp_path / "bad.json", mixed[1])
    assert status == 2 and out == ""
    assert "bad.json: not a tileconform results file" in err
    status, _, err = _diff(capsys, mixed[1], tmp_path / "missing.json")
    assert status == 2 and "missing.json: cannot read" in err
