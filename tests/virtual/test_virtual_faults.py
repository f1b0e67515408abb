"""The run faults the virtual device predicts from the host (virtual/faults.py) and the operands
the FlashInfer backend says its kernels move with TMA (flashinfer/run_faults.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.run_faults import predicted_fault, tma_operands
from pytest_tileconform.verdict import Stage
from pytest_tileconform.virtual.faults import (
    MISALIGNED_STATUS,
    TMA_STRIDE,
    RunFault,
    TmaOperand,
    tma_stride_fault,
)
from pytest_tileconform.virtual.run import VirtualRun, verdict_of


def _config(
    out: str = "bf16", fusion: str = "none", act: str = "", swap_ab: bool = False, arch: int = 90
) -> KernelConfig:
    act = act or out
    return KernelConfig(arch, act, act, out, (128, 128, 64), (1, 1, 1), swap_ab, fusion)


def test_pitches_of_16_bytes_break_no_rule() -> None:
    assert tma_stride_fault([TmaOperand("A", 16 * 8), TmaOperand("D", 1024 * 8)]) is None


def test_the_first_unaligned_pitch_is_the_fault() -> None:
    fault = tma_stride_fault([TmaOperand("A", 1024 * 8), TmaOperand("D", 200 * 8), TmaOperand("B", 8)])
    assert fault is not None
    assert (fault.rule, fault.status) == (TMA_STRIDE, MISALIGNED_STATUS)
    assert fault.detail.startswith("D:") and "200 bytes" in fault.detail


@pytest.mark.parametrize(
    ("config", "n", "k", "operand"),
    [
        (_config("bf16"), 384, 100, "A"),  # rows of 200 bytes (recorded on the H200: run)
        (_config("bf16"), 100, 512, "D"),  # D rows of 200 bytes (recorded on the H200: run)
        (_config("fp16"), 384, 100, "A"),
        (_config("bf16", act="fp8_e4m3"), 384, 40, "A"),  # fp8 rows of 40 bytes
        (_config("fp32"), 50, 512, "D"),  # fp32 rows of 200 bytes
        (_config("bf16", swap_ab=True), 100, 512, "D"),  # swap_ab moves the same tensors
        (_config("bf16", fusion="finalize"), 384, 100, "A"),  # finalize still loads A by TMA
    ],
)
def test_an_unaligned_tma_operand_faults(config: KernelConfig, n: int, k: int, operand: str) -> None:
    fault = predicted_fault(config, n, k)
    assert fault is not None and fault.rule == TMA_STRIDE
    assert fault.detail.startswith(f"{operand} ")


def test_finalize_stores_d_without_tma() -> None:
    """Its D pitch is no TMA rule's business: the H200 ran finalize with n=101 (a numerics
    failure, which no host rule predicts)."""
    assert [o.what[0] for o in tma_operands(_config(fusion="finalize"), 101, 512)] == ["A", "B"]
    assert predicted_fault(_config(fusion="finalize"), 101, 512) is None
    assert predicted_fault(_config(fusion="finalize"), 100, 512) is None


def test_aligned_problems_and_unmodelled_archs_do_not_fault() -> None:
    assert predicted_fault(_config("bf16"), 384, 512) is None
    assert predicted_fault(_config("bf16", act="fp8_e4m3"), 384, 48) is None  # 48 fp8 bytes
    assert predicted_fault(_config("bf16", arch=100), 100, 100) is None


def _passed_run() -> tuple[VirtualRun, HarnessReport]:
    log: list[dict[str, Any]] = [{"call": "cudaLaunchKernelExC", "result": "cudaSuccess"}]
    report = HarnessReport({"final": True, "stage": "pass", "status": "Success", "smem_requested": 215040})
    return VirtualRun(0, "", "", "sm_90a", log), report


def test_a_predicted_fault_is_a_run_failure_judged_through_launch() -> None:
    fault = RunFault(TMA_STRIDE, MISALIGNED_STATUS, "A: ...")
    verdict = verdict_of(*_passed_run(), "virtual (sm90 profile)", fault=fault)
    assert verdict.failed_stage is Stage.RUN
    assert verdict.judged_through is Stage.LAUNCH and not verdict.kernel_ran
    assert verdict.status == MISALIGNED_STATUS
    assert verdict.detail.startswith(TMA_STRIDE)
    assert verdict.extra["run_rule"] == TMA_STRIDE
    assert verdict.smem_requested == 215040


def test_without_a_fault_a_pass_stays_a_pass() -> None:
    assert verdict_of(*_passed_run(), "virtual (sm90 profile)").passed
