"""report compare holds a virtual failure to its stage, even one past launch (a run fault the
host predicted): only a virtual pass through launch leaves what follows unjudged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import report

from pytest_tileconform.commands.cli import main
from pytest_tileconform.results.compare import UNRUN_AGREE

HARDWARE = report("smoke-hardware")
VIRTUAL = report("smoke-virtual")


CASE_ID = json.loads(VIRTUAL.read_text())["cases"][0]["id"]


def _with_verdict(source: Path, target: Path, **fields: Any) -> Path:
    """``source`` with the verdict of :data:`CASE_ID` changed."""
    document = json.loads(source.read_text())
    next(c for c in document["cases"] if c["id"] == CASE_ID)["verdict"].update(fields)
    target.write_text(json.dumps(document))
    return target


def _compare(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, list[str]]:
    status = main(["report", "compare", str(a), str(b)])
    return status, capsys.readouterr().out.splitlines()


RUN_FAULT = {"outcome": "run", "failed_stage": "run", "status": "cudaErrorMisalignedAddress"}


@pytest.mark.parametrize("hardware_outcome", ["numerics", "pass"])
def test_a_virtual_run_fault_the_hardware_did_not_take_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hardware_outcome: str
) -> None:
    virtual = _with_verdict(VIRTUAL, tmp_path / "v.json", **RUN_FAULT)
    hardware = HARDWARE
    if hardware_outcome != "pass":
        hardware = _with_verdict(
            HARDWARE, tmp_path / "h.json", outcome="numerics", failed_stage="numerics", status="mismatch"
        )
    for a, b in ((hardware, virtual), (virtual, hardware)):
        status, out = _compare(capsys, a, b)
        assert status == 1
        assert out[0].startswith(f"DISAGREE {CASE_ID}: hardware {hardware_outcome} smem=")
        assert " | virtual run smem=" in out[0]
        assert out[-1] == f"5/6 cases agree (stage and shared memory requested); 5 {UNRUN_AGREE}"


def test_a_virtual_run_fault_the_hardware_took_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    virtual = _with_verdict(VIRTUAL, tmp_path / "v.json", **RUN_FAULT)
    hardware = _with_verdict(HARDWARE, tmp_path / "h.json", **RUN_FAULT)
    # the run fault agrees at its stage; the other five only through launch
    assert _compare(capsys, hardware, virtual) == (
        0,
        [f"6/6 cases agree (stage and shared memory requested); 5 {UNRUN_AGREE}"],
    )


def test_a_virtual_pass_leaves_a_later_hardware_failure_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hardware = _with_verdict(HARDWARE, tmp_path / "h.json", **RUN_FAULT)
    assert _compare(capsys, hardware, VIRTUAL)[0] == 0
