"""tileconform report compare: two results files, case by case (hardware vs virtual, or exactly)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import report
from helpers.fake_backend import TileRun
from helpers.paths import REPO

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.compare import EXACT_FIELDS, UNRUN_AGREE
from pytest_tileconform.results.store import read_results, write_results

HARDWARE = report("smoke-hardware")
WARM = report("smoke-hardware-warm")
VIRTUAL = report("smoke-virtual")
EXACT_SUMMARY = "(exact: " + ", ".join(EXACT_FIELDS) + ")"


def compare(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, list[str], str]:
    status = main(["report", "compare", str(a), str(b)])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def _edit(source: Path, target: Path, change: Any) -> Path:
    document = json.loads(source.read_text())
    change(document)
    target.write_text(json.dumps(document))
    return target


def _verdict(document: dict[str, Any], index: int = 0) -> dict[str, Any]:
    verdict: dict[str, Any] = document["cases"][index]["verdict"]
    return verdict


def test_hardware_against_virtual_either_way_round(capsys: pytest.CaptureFixture[str]) -> None:
    for a, b in ((HARDWARE, VIRTUAL), (VIRTUAL, HARDWARE)):
        status, out, _ = compare(capsys, a, b)
        assert status == 0
        assert out == [f"6/6 cases agree (stage and shared memory requested); 6 {UNRUN_AGREE}"]


def test_hardware_against_virtual_disagreement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(document: dict[str, Any]) -> None:
        _verdict(document).update(outcome="initialize", failed_stage="initialize", smem_requested=1)

    virtual = _edit(VIRTUAL, tmp_path / "v.json", refuse)
    case_id = json.loads(VIRTUAL.read_text())["cases"][0]["id"]
    hardware_smem = {
        c["id"]: c["verdict"]["smem_requested"] for c in json.loads(HARDWARE.read_text())["cases"]
    }
    for a, b in ((HARDWARE, virtual), (virtual, HARDWARE)):
        status, out, _ = compare(capsys, a, b)
        assert status == 1
        assert out == [
            f"DISAGREE {case_id}: hardware launch accepted smem={hardware_smem[case_id]} "
            "| virtual initialize smem=1",
            f"5/6 cases agree (stage and shared memory requested); 5 {UNRUN_AGREE}",
        ]


def test_hardware_numerics_failure_agrees_with_a_virtual_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The virtual device judges through launch: what happens after it is not compared."""

    def numerics(document: dict[str, Any]) -> None:
        _verdict(document).update(outcome="numerics", failed_stage="numerics", status="mismatch")

    hardware = _edit(HARDWARE, tmp_path / "h.json", numerics)
    assert compare(capsys, hardware, VIRTUAL)[0] == 0


def test_format_1_and_the_current_format_of_the_same_run_agree_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """How a reshaping proves it changed no verdict: the old code's report against the new one's."""
    upgraded = tmp_path / "format3.json"
    write_results(upgraded, read_results(VIRTUAL))
    assert json.loads(upgraded.read_text())["format"] == 3 and json.loads(VIRTUAL.read_text())["format"] == 1
    status, out, err = compare(capsys, VIRTUAL, upgraded)
    assert (status, out, err) == (0, [f"6/6 cases agree {EXACT_SUMMARY}"], "")


def test_exact_ignores_timings_but_not_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A warm rerun of the same hardware run: different timings, build paths and workers."""
    status, out, _ = compare(capsys, HARDWARE, WARM)
    assert (status, out) == (0, [f"6/6 cases agree {EXACT_SUMMARY}"])
    case_id = json.loads(WARM.read_text())["cases"][2]["id"]

    def status_changed(document: dict[str, Any]) -> None:
        _verdict(document, 2)["status"] = "Error Internal"
        _verdict(document, 2)["extra"]["kernel_ms"] = 99.0

    status, out, _ = compare(capsys, HARDWARE, _edit(WARM, tmp_path / "w.json", status_changed))
    assert status == 1
    assert out == [
        f"DISAGREE {case_id}: {HARDWARE} status='' | {tmp_path / 'w.json'} status='Error Internal'",
        f"5/6 cases agree {EXACT_SUMMARY}",
    ]


def test_exact_compares_the_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def other_gpu(document: dict[str, Any]) -> None:
        for entry in document["cases"]:
            entry["verdict"]["source"] = "hardware (NVIDIA H100 80GB HBM3, CC 9.0)"

    status, out, _ = compare(capsys, HARDWARE, _edit(HARDWARE, tmp_path / "h100.json", other_gpu))
    assert status == 1
    assert out[0].endswith(
        "device='hardware:NVIDIA H200 (sm90, CC 9.0)' | "
        f"{tmp_path / 'h100.json'} device='hardware:NVIDIA H100 80GB HBM3 (sm90, CC 9.0)'"
    )
    assert out[-1] == f"0/6 cases agree {EXACT_SUMMARY}"


def test_cases_in_one_file_only_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = json.loads(HARDWARE.read_text())
    first, last = original["cases"][0]["id"], original["cases"][-1]["id"]
    fewer = _edit(HARDWARE, tmp_path / "fewer.json", lambda d: d["cases"].pop())
    extra = copy.deepcopy(original["cases"][0])
    extra["id"] = "sm90-new-case"
    more = _edit(HARDWARE, tmp_path / "more.json", lambda d: d["cases"].append(extra))
    status, out, _ = compare(capsys, fewer, more)
    assert status == 0
    assert out == [
        f"ONLY IN {more}: {last}",
        f"ONLY IN {more}: sm90-new-case",
        f"5/5 cases agree {EXACT_SUMMARY}",
    ]

    def skip_first(document: dict[str, Any]) -> None:
        document["cases"][0].update(verdict=None, outcome="skipped")

    skipped = _edit(HARDWARE, tmp_path / "skipped.json", skip_first)
    status, out, _ = compare(capsys, HARDWARE, skipped)  # the same device: not judged disagrees
    assert status == 1
    assert out[0] == f"DISAGREE {first}: {HARDWARE} outcome='pass' | {skipped} not judged"
    status, out, _ = compare(capsys, skipped, VIRTUAL)  # hardware vs virtual: listed only
    assert status == 0
    assert out == [
        f"JUDGED ONLY IN {VIRTUAL}: {first}",
        f"5/5 cases agree (stage and shared memory requested); 5 {UNRUN_AGREE}",
    ]


def test_nothing_in_common_or_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sm120 = report("sm120-virtual")
    status, out, err = compare(capsys, HARDWARE, sm120)
    assert status == 2
    assert out[-1] == "0/0 cases agree (no case was judged in both)"
    assert f"no case was judged in both {HARDWARE} and {sm120}" in err
    (tmp_path / "bad.json").write_text('{"format": 1, "cases": [{"id": "x"}]}')
    status, out, err = compare(capsys, HARDWARE, tmp_path / "bad.json")
    assert (status, out) == (2, [])
    assert "bad.json: cases[0]: missing 'case'" in err


def test_a_run_against_itself_through_the_plugin(tc: TileRun, capsys: pytest.CaptureFixture[str]) -> None:
    tc.matrix(
        """\
        version: 1
        backend: fake
        suites:
          - arch: sm90
            dtype: bf16
            tile: [128x64x64, 256x128x64]
            problems: {experts: 2, rows: 64, n: 256, k: 128}
        """
    )
    tc.verdicts({"sm90-bf16-256x128x64-c1x1x1-none": {"stage": "initialize", "smem": 240000, "limit": 1}})
    tc.run("--tile-report", "a.json")
    tc.run("--tile-report", "b.json")
    capsys.readouterr()  # the runs' own output
    assert compare(capsys, tc.path / "a.json", tc.path / "b.json")[:2] == (
        0,
        [f"2/2 cases agree {EXACT_SUMMARY}"],
    )


def test_help_names_what_is_compared() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", "report", "compare", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for name in EXACT_FIELDS:
        assert name in text
    assert "Exit status: 0" in text


def test_the_old_entry_point_is_gone() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform.results.compare", str(HARDWARE), str(VIRTUAL)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout == ""


def test_an_id_in_two_matrices_is_compared_in_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run over two matrices that share a case judges it twice: both entries are compared, so a
    disagreement in the second one is not hidden behind the first."""

    def twice(document: dict[str, Any]) -> None:
        again = copy.deepcopy(document["cases"][0])
        again["matrix"] = "/elsewhere/other.yaml"
        document["cases"].append(again)

    a = _edit(VIRTUAL, tmp_path / "a.json", twice)
    status, out, _ = compare(capsys, a, a)
    assert status == 0
    assert out[-1].startswith("7/7 cases agree")

    def refuse_second(document: dict[str, Any]) -> None:
        twice(document)
        _verdict(document, -1).update(outcome="initialize", failed_stage="initialize")

    b = _edit(VIRTUAL, tmp_path / "b.json", refuse_second)
    status, out, _ = compare(capsys, a, b)
    case_id = json.loads(VIRTUAL.read_text())["cases"][0]["id"]
    assert status == 1
    assert [line for line in out if line.startswith("DISAGREE")] == [
        line for line in out if line.startswith(f"DISAGREE other.yaml::{case_id}:")
    ]
    assert len([line for line in out if line.startswith("DISAGREE")]) == 1
    assert out[-1].startswith("6/7 cases agree")
