"""The run faults the virtual device predicts from the host (virtual/faults.py) and the accesses
the FlashInfer backend says its kernels make (flashinfer/run_faults.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tileconform.flashinfer.codegen import KernelConfig
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.run_faults import predicted_fault, scatter_vector_elements
from pytest_tileconform.verdict import Stage
from pytest_tileconform.virtual.faults import (
    MISALIGNED_STATUS,
    MISALIGNED_VECTOR,
    RunFault,
    VectorAccess,
    misaligned_vector,
)
from pytest_tileconform.virtual.run import VirtualRun, verdict_of


def _config(
    out: str = "bf16", tile: tuple[int, int, int] = (128, 128, 64), fusion: str = "finalize", act: str = ""
) -> KernelConfig:
    act = act or out
    return KernelConfig(90, act, act, out, tile, (1, 1, 1), False, fusion)


def test_aligned_vectors_break_no_rule() -> None:
    assert misaligned_vector([VectorAccess("D", 16, [0, 16, 4096])]) is None


def test_the_first_misaligned_vector_is_the_fault() -> None:
    fault = misaligned_vector([VectorAccess("D", 16, [0, 200, 8])])
    assert fault is not None
    assert (fault.rule, fault.status) == (MISALIGNED_VECTOR, MISALIGNED_STATUS)
    assert "offset 200" in fault.detail and "16-byte" in fault.detail


def test_scalar_accesses_are_never_misaligned() -> None:
    assert misaligned_vector([VectorAccess("D", 1, [3, 7])]) is None


@pytest.mark.parametrize(
    ("out", "tile", "act", "width"),
    [
        ("bf16", (128, 128, 64), "", 8),  # subtile 128 x 32: 16 values a thread, capped at 8
        ("fp16", (128, 16, 64), "", 8),  # 128 x 16: 8 a thread
        ("bf16", (128, 8, 64), "", 4),  # 128 x 8: 4 a thread
        ("bf16", (128, 128, 128), "fp8_e4m3", 8),  # fp8 inputs, bf16 D
        ("fp32", (128, 128, 32), "", 1),  # fp32 D: scalar atomic add
    ],
)
def test_scatter_vector_width(out: str, tile: tuple[int, int, int], act: str, width: int) -> None:
    assert scatter_vector_elements(_config(out, tile, act=act)) == width


def test_odd_rows_of_an_odd_width_fault() -> None:
    fault = predicted_fault(_config(), 101, [0, 2, 3])
    assert fault is not None and fault.rule == MISALIGNED_VECTOR
    assert "offset 404" in fault.detail  # row 2 starts 2 * 101 * 2 bytes into D


def test_rows_of_200_bytes_fault_only_with_8_element_vectors() -> None:
    assert predicted_fault(_config(tile=(128, 128, 64)), 100, [0, 1]) is not None  # 16-byte vectors
    assert predicted_fault(_config(tile=(128, 8, 64)), 100, [0, 1]) is None  # 8-byte vectors


def test_no_fault_without_finalize_or_when_every_row_is_aligned() -> None:
    assert predicted_fault(_config(fusion="none"), 101, None) is None
    assert predicted_fault(_config(), 101, [0, 8, 16]) is None  # rows 1,616 bytes apart
    assert predicted_fault(_config(), 384, [0, 1, 5]) is None
    assert predicted_fault(_config(out="fp32", tile=(128, 128, 32)), 101, [1, 3]) is None


def _passed_run() -> tuple[VirtualRun, HarnessReport]:
    log: list[dict[str, Any]] = [{"call": "cudaLaunchKernelExC", "result": "cudaSuccess"}]
    report = HarnessReport({"final": True, "stage": "pass", "status": "Success", "smem_requested": 215040})
    return VirtualRun(0, "", "", "sm_90a", log), report


def test_a_predicted_fault_is_a_run_failure_judged_through_launch() -> None:
    fault = RunFault(MISALIGNED_VECTOR, MISALIGNED_STATUS, "D: ...")
    verdict = verdict_of(*_passed_run(), "virtual (sm90 profile)", fault=fault)
    assert verdict.failed_stage is Stage.RUN
    assert verdict.judged_through is Stage.LAUNCH and not verdict.kernel_ran
    assert verdict.status == MISALIGNED_STATUS
    assert verdict.detail.startswith(MISALIGNED_VECTOR)
    assert verdict.extra["run_rule"] == MISALIGNED_VECTOR
    assert verdict.smem_requested == 215040


def test_without_a_fault_a_pass_stays_a_pass() -> None:
    assert verdict_of(*_passed_run(), "virtual (sm90 profile)").passed
