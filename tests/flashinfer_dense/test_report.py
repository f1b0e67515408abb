"""Where a dense harness run stopped, read from FlashInfer's launcher messages: each step the
reader knows is a message the installed launcher throws, and a run's verdict.json reads as the
stage, status and workspace the virtual device's verdict is made of."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.sources import find_sources
from pytest_tileconform.flashinfer_dense.report import LAUNCHER_STEPS, DenseReport
from pytest_tileconform.verdict import Stage


def test_every_step_read_is_a_message_the_launcher_throws() -> None:
    header = find_sources().root / "include" / "flashinfer" / "gemm" / "mxfp8_gemm_template_sm120.h"
    messages = re.findall(r'errMsg(?:\(| = )"([^"]+)"', header.read_text())
    assert len(messages) == 4
    found = [next(name for words, name, _ in LAUNCHER_STEPS if words.search(m)) for m in messages]
    assert found == ["prepare", "can_implement", "initialize", "run"]


def test_every_step_read_is_a_message_the_fp4_launcher_throws() -> None:
    """SM120 NVFP4: both schedulers' launchers share runFp4GemmImpl and its four throws."""
    header = find_sources().root / "include" / "flashinfer" / "gemm" / "fp4_gemm_template_sm120.h"
    text = header.read_text()
    body = text[text.index("inline size_t runFp4GemmImpl") : text.index("#ifdef PLACEHOLDER_KERNELS")]
    throws = re.findall(r"throw std::runtime_error\((.*?)\);", body, re.S)
    messages = ["".join(re.findall(r'"([^"]*)"', thrown)) for thrown in throws]
    assert len(messages) == 4
    found = [next(name for words, name, _ in LAUNCHER_STEPS if words.search(m)) for m in messages]
    assert found == ["prepare", "can_implement", "initialize", "run"]


@pytest.mark.parametrize(
    ("written", "name", "stage", "status"),
    [
        ({"outcome": "returned", "message": ""}, "pass", None, ""),
        (
            {
                "outcome": "threw",
                "message": "[MXFP8 SM120 gemm Runner] Failed to initialize cutlass MXFP8 gemm on sm120. "
                "Error: Error Internal (kernel needs 111616 bytes of shared memory, device per-block "
                "limit is 101376 bytes)",
            },
            "initialize",
            Stage.INITIALIZE,
            "Error Internal",
        ),
        (
            {
                "outcome": "threw",
                "message": "[MXFP8 SM120 gemm Runner] MXFP8 SM120 Gemm cutlass kernel "
                "will fail for params. Error: Error Misaligned Operand",
            },
            "can_implement",
            Stage.CAN_IMPLEMENT,
            "Error Misaligned Operand",
        ),
        ({"outcome": "threw", "message": "[Error][MXFP8 SM120] Config is invalid"}, "launcher", None, ""),
    ],
)
def test_a_run_reads_as_its_stage(
    tmp_path: Path, written: dict[str, str], name: str, stage: Stage | None, status: str
) -> None:
    (tmp_path / "verdict.json").write_text(json.dumps({**written, "workspace_bytes": 0}))
    report = DenseReport.read(tmp_path, 77824)
    assert report.final and (report.name, report.stage, report.status) == (name, stage, status)
    assert report.passed == (name == "pass") and report.smem_requested == 77824
    assert report.workspace_bytes == 0


def test_no_file_is_no_decision(tmp_path: Path) -> None:
    report = DenseReport.read(tmp_path)
    assert not report.final and report.name is None and report.stage is None
