"""tileconform report merge: results of several runners and shards -> one compatibility table."""

from __future__ import annotations

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
from pytest_tileconform.flashinfer.plugin import pytest_tileconform_host_columns
from pytest_tileconform.results.merge import merge, to_markdown
from pytest_tileconform.results.merge_html import to_html

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: [bf16, {act: fp8, weight: fp8, out: bf16}]
    tile: [128x64x64, 128x128x64, 256x128x64]
    cluster: [1x1x1, 2x1x1]
    fusion: [none, finalize]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""

VERDICTS = {
    "sm90-bf16-256x128x64-c2x1x1-finalize": {
        "stage": "initialize",
        "status": "Error Internal",
        "smem": 240000,
        "limit": 232448,
        "source": "hardware (NVIDIA H200, CC 9.0)",
    },
}


def _verdicts_all_hardware(tc: TileRun, ids: list[str]) -> None:
    table: dict[str, Any] = {
        i: {"stage": "pass", "smem": 200000, "limit": 232448, "source": "hardware (NVIDIA H200, CC 9.0)"}
        for i in ids
    }
    table.update(VERDICTS)
    tc.verdicts(table)


def _case_ids(tc: TileRun) -> list[str]:
    return [n.rpartition("::")[2] for n in tc.collect()]


#: The fake backend's verdicts name no device; a hardware backend's name the GPU that judged them.
H200_DEVICE_CONFTEST = """

from pytest_tileconform.verdict import Device


class _JudgedOnH200:
    def pytest_tileconform_verdict(self, config, case, verdict):
        verdict.device = Device(kind="hardware", name="NVIDIA H200", arch="sm90", cc="9.0")


def pytest_configure(config):
    config.pluginmanager.register(_JudgedOnH200(), "judged-on-h200")
"""


@pytest.fixture
def sharded(tc: TileRun) -> tuple[TileRun, list[Path], Path]:
    """The same matrix run whole and as three shards, each writing --tile-report."""
    conftest = tc.path / "conftest.py"
    conftest.write_text(conftest.read_text() + H200_DEVICE_CONFTEST)
    tc.matrix(MATRIX)
    _verdicts_all_hardware(tc, _case_ids(tc))
    whole = tc.path / "whole.json"
    tc.run("--tile-report", str(whole))
    shards = []
    for i in (1, 2, 3):
        path = tc.path / f"shard{i}.json"
        tc.run("--tile-shard", f"{i}/3", "--tile-report", str(path))
        shards.append(path)
    return tc, shards, whole


def test_shards_merge_to_the_whole_run(sharded: tuple[TileRun, list[Path], Path]) -> None:
    _, shards, whole = sharded
    merged_shards, merged_whole = merge(shards), merge([whole])
    assert sum(merged_shards.devices.values()) == sum(merged_whole.devices.values()) == 24
    body = to_markdown(merged_shards).split("## Devices", 1)[1]
    assert body == to_markdown(merged_whole).split("## Devices", 1)[1]
    # the matrix expects every case to pass: the rejection is a regression
    assert (
        "pass 3/4 · **regression 1/4** (initialize, expected pass, Error Internal, 240,000 B > 232,448)"
        in body
    )
    assert "| D1 | NVIDIA H200 | hardware | 9.0 | 232,448 |" in body
    assert (
        "`sm90-bf16-256x128x64-c2x1x1-finalize` | regression | pass | initialize | Error Internal "
        "| 240,000 | 232,448 |" in body
    )


def test_report_records_a_host_fingerprint(sharded: tuple[TileRun, list[Path], Path]) -> None:
    _, _, whole = sharded
    host = json.loads(whole.read_text())["host"]
    assert set(host["fingerprint"]) == {"gpus", "driver", "cuda_driver", "nvcc", "flashinfer", "tileconform"}


def test_rows_per_device_fingerprint(tmp_path: Path) -> None:
    """An H200 file, a virtual sm120 file and a file without fingerprint (old format) merge."""
    hw = _document(
        [("sm90-bf16-128x128x64-c1x1x1-none", "sm90", "bf16", "128x128x64", "pass", 215040, 232448, _H200)],
        fingerprint={
            "driver": "580.159.04",
            "cuda_driver": "13.0",
            "nvcc": "Build cuda_13.0.r13.0/x",
            "flashinfer": "0.7.4",
        },
    )
    virtual = _document(
        [
            (
                "sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize",
                "sm120",
                "nvfp4",
                "128x256x128",
                "initialize",
                102400,
                101376,
                "virtual (sm120 profile)",
            ),
            (
                "sm120-nvfp4-bf16-128x256x128-c1x1x1-none",
                "sm120",
                "nvfp4",
                "128x256x128",
                "pass",
                98304,
                101376,
                "virtual (sm120 profile)",
            ),
        ],
        fingerprint=None,
    )
    (tmp_path / "hw.json").write_text(json.dumps(hw))
    (tmp_path / "v.json").write_text(json.dumps(virtual))
    merged = merge([tmp_path / "hw.json", tmp_path / "v.json"], columns=pytest_tileconform_host_columns())
    text = to_markdown(merged)
    assert (
        "| D1 | NVIDIA H200 | hardware | 9.0 | 232,448 | 580.159.04 | 13.0 | 0.7.4 "
        "| Build cuda_13.0.r13.0/x |" in text
    )
    assert "| D2 | virtual sm120 | virtual | 12.0 | 101,376 | n/a | ? | 0.7.4 | ? |" in text
    assert "## sm120 · nvfp4-bf16" in text
    # a format-1 file without expectations: pytest failed the rejected case, so it regressed
    cell = "unrun 1/2 (through launch) · **regression 1/2** (initialize, expected ?, 102,400 B > 101,376)"
    assert cell in text
    page = to_html(merged)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    assert 'class="regression"' in page and 'class="pass"' in page
    assert "unrun 1/2<br>through launch" in page  # the virtual pass: never a pass


_H200 = "hardware (NVIDIA H200, CC 9.0)"


def _document(rows: list[tuple[Any, ...]], fingerprint: dict[str, Any] | None) -> dict[str, Any]:
    cases = []
    for case_id, arch, dtype, tile, outcome, smem, limit, source in rows:
        out = "bf16"
        cases.append(
            {
                "id": case_id,
                "outcome": "passed" if outcome == "pass" else "failed",
                "case": {
                    "arch": arch,
                    "act": dtype,
                    "weight": dtype,
                    "out": out,
                    "tile": tile,
                    "cluster": "1x1x1",
                    "swap_ab": False,
                    "fusion": "none",
                    "problem": {"name": None, "rows": [1], "n": 8, "k": 8},
                },
                "verdict": {
                    "outcome": outcome,
                    "failed_stage": None if outcome == "pass" else outcome,
                    "judged_through": "launch" if source.startswith("virtual") else "numerics",
                    "source": source,
                    "status": "",
                    "smem_requested": smem,
                    "smem_limit": limit,
                    "extra": {"flashinfer": "0.7.4"},
                },
            }
        )
    host: dict[str, Any] = {"node": "x"}
    if fingerprint is not None:
        host["fingerprint"] = fingerprint
    return {"format": 1, "created": "2026-11-29T00:00:00+00:00", "host": host, "cases": cases}


def test_conflicting_verdicts_are_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = ("sm90-bf16-128x128x64-c1x1x1-none", "sm90", "bf16", "128x128x64")
    (tmp_path / "a.json").write_text(json.dumps(_document([(*row, "pass", 1, 2, _H200)], None)))
    (tmp_path / "b.json").write_text(json.dumps(_document([(*row, "run", 1, 2, _H200)], None)))
    assert main(["report", "merge", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    captured = capsys.readouterr()
    assert "conflict x1" in captured.out
    assert "warning: conflict: sm90-bf16-128x128x64-c1x1x1-none on NVIDIA H200: pass" in captured.err


def test_shipped_results_merge(tmp_path: Path) -> None:
    """The H200 run and the virtual sm100 / sm120 runs of results/: one table, HTML and Markdown."""
    files = [
        report("sm90-bf16-hardware"),
        report("sm100-virtual"),
        report("sm120-virtual"),
    ]
    code = main(
        [
            "report",
            "merge",
            *map(str, files),
            "-o",
            str(tmp_path / "t.md"),
            "--html",
            str(tmp_path / "t.html"),
        ]
    )
    assert code == 0
    text = (tmp_path / "t.md").read_text()
    for heading in (
        "## sm90 · bf16",
        "## sm100 · bf16",
        "## sm120 · nvfp4-bf16",
        "## sm120 · mxfp8xmxfp4-bf16",
    ):
        assert heading in text
    assert text.count("| D") >= 3
    assert (tmp_path / "t.html").read_text().count("<table>") == 1 + 5 + 1  # devices, 5 sections, rejected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "t.json:1:2: not JSON"),
        ('{"format": 1}', "t.json: not a tileconform results file"),
        ('{"format": 7, "cases": []}', "t.json: results format 7 is not one this version reads"),
        ('{"format": 1, "cases": [{"id": "x"}]}', "t.json: cases[0]: missing 'case'"),
        (
            '{"format": 1, "cases": [{"id": "x", "case": {"arch": "sm90"}}]}',
            "t.json: cases[0].case: missing 'act', 'weight', 'out', 'tile'",
        ),
        (
            '{"format": 1, "cases": [{"id": "x", "case": null, '
            '"verdict": {"outcome": "weird", "source": "s"}}]}',
            "t.json: cases[0].verdict.outcome: unknown outcome 'weird'",
        ),
    ],
)
def test_bad_input_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    (tmp_path / "t.json").write_text(content)
    assert main(["report", "merge", str(tmp_path / "t.json")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "merge", str(tmp_path / "nope.json")]) == 2
    assert "nope.json: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["report", "--help"], ["report", "merge", "--help"]])
def test_help_everywhere(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", *argv], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: tileconform")


def test_usage_error_exit_status() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_tileconform", "report", "merge"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "the following arguments are required: RESULTS.json" in proc.stderr
    assert proc.stdout == ""


def test_the_documented_example_is_current(tmp_path: Path) -> None:
    """docs/merged-example.{md,html} are what the command in docs/ci-gating.md writes today."""
    inputs = [
        "results/verdicts/h200-2026-11-29/sm90-bf16-hardware.json.gz",
        "results/verdicts/h200-2026-11-29/sm90-fp8-bf16-none-hardware.json.gz",
        "results/verdicts/h200x2-2026-11-29-grouped/sm90-fp8-rest-hardware.json.gz",
        "results/verdicts/h200x2-2026-11-29-grouped/sm90-fp16-fp32-hardware.json.gz",
        "results/verdicts/sm100-virtual-2026-11-29.json.gz",
        "results/verdicts/h200x2-2026-11-29-grouped/sm120-flashinfer-virtual.json.gz",
    ]
    assert " \\\n    ".join(inputs) in (REPO / "docs/ci-gating.md").read_text()
    md, page = tmp_path / "m.md", tmp_path / "m.html"
    assert (
        main(["report", "merge", *(str(REPO / i) for i in inputs), "-o", str(md), "--html", str(page)]) == 0
    )
    assert md.read_text() == (REPO / "docs/merged-example.md").read_text()
    assert page.read_text() == (REPO / "docs/merged-example.html").read_text()


def test_merge_names_flashinfers_tactic_ids(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """With a saved probe output, each listed case carries the ids that select its kernel: the
    SM120 NVFP4 finalize tiles the virtual device refuses are GEMM 2's tactics 26 and 27."""
    probe = REPO / "tests" / "data" / "tactics-sm120-flashinfer-0.7.4.jsonl"
    results = report("sm120-virtual")
    page = tmp_path / "m.html"
    assert main(["report", "merge", str(results), "--tactics", str(probe), "--html", str(page)]) == 0
    assert "<th>FlashInfer tactic ids</th>" in page.read_text()
    assert main(["report", "merge", str(results), "--tactics", str(probe)]) == 0
    out = capsys.readouterr().out
    assert "`sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize` | known-bad" in out
    rows = [line for line in out.splitlines() if "-finalize` | known-bad" in line]
    assert rows and all(line.rstrip(" |").split("| ")[-1] in ("G2:#26", "G2:#27") for line in rows)
    assert main(["report", "merge", str(results)]) == 0
    assert "FlashInfer tactic ids" not in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["report", "merge", str(results), "--tactics", str(bad)]) == 2
    assert "--tactics" in capsys.readouterr().err
