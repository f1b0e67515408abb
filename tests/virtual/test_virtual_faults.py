"""The failures the virtual device predicts from the host (virtual/faults.py: a TMA group start
off 16 bytes faults, a TMA row pitch off 16 bytes and a finalize D of such rows are a wrong D)
and what the FlashInfer backend says its kernels move and how (flashinfer/run_faults.py). The
cases named are matrices/sm90-failures.yaml's, as the H200 judged them."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.flashinfer.run_faults import finalize_output, predicted_fault, tma_operands
from pytest_tileconform.verdict import Stage
from pytest_tileconform.virtual.faults import (
    MISALIGNED_STATUS,
    MISMATCH_STATUS,
    PREDICTED,
    TMA_ADDRESS,
    TMA_STRIDE,
    VECTOR_ROW,
    RunFault,
    TmaOperand,
    VectorRows,
    tma_address_fault,
    tma_stride_fault,
    vector_row_fault,
)
from pytest_tileconform.virtual.run import VirtualRun, verdict_of

#: rows per expert whose experts start one row in (the run suite) or on even rows (align-pitch)
ONE_ROW_IN = (0, 1, 77, 300)
EVEN_ROWS = (0, 2, 78, 300)


def _config(
    out: str = "bf16", fusion: str = "none", act: str = "", swap_ab: bool = False, arch: int = 90
) -> KernelConfig:
    act = act or out
    return KernelConfig(arch, act, act, out, (128, 128, 64), (1, 1, 1), swap_ab, fusion)


def _problem(n: int, k: int, rows: tuple[int, ...] = ONE_ROW_IN, tokens: int | None = None) -> Problem:
    if tokens is None:
        return Problem(rows=rows, n=n, k=k)
    return Problem(rows=rows, n=n, k=k, tokens=tokens, top_k=sum(rows) // tokens)


def test_pitches_and_starts_of_16_bytes_break_no_rule() -> None:
    operands = [TmaOperand("A", 16 * 8, (0, 32 * 8)), TmaOperand("D", 1024 * 8, (0,))]
    assert tma_address_fault(operands) is None and tma_stride_fault(operands) is None


def test_the_first_group_start_off_16_bytes_is_a_fault() -> None:
    fault = tma_address_fault([TmaOperand("A", 1024 * 8, (0,)), TmaOperand("D", 200 * 8, (0, 200 * 8))])
    assert fault is not None
    assert (fault.rule, fault.status, fault.stage) == (TMA_ADDRESS, MISALIGNED_STATUS, Stage.RUN)
    assert fault.detail.startswith("D:") and "200 bytes into its buffer" in fault.detail


def test_a_pitch_off_16_bytes_is_a_wrong_d_from_the_second_row() -> None:
    fault = tma_stride_fault([TmaOperand("A", 1024 * 8), TmaOperand("D", 200 * 8), TmaOperand("B", 8)])
    assert fault is not None
    assert (fault.rule, fault.status, fault.stage) == (TMA_STRIDE, MISMATCH_STATUS, Stage.NUMERICS)
    assert fault.detail.startswith(f"{PREDICTED}: D:") and "keeps 192 of them" in fault.detail
    assert tma_stride_fault([TmaOperand("D", 200 * 8, (0,), rows=1)]) is None


@pytest.mark.parametrize(
    ("config", "n", "k", "operand"),
    [
        (_config("bf16"), 384, 100, "A"),  # k100: the third expert's A 200 bytes in (H200: run)
        (_config("bf16"), 100, 512, "D"),  # n100: its D 200 bytes in (H200: run)
        (_config("fp16"), 384, 100, "A"),
        (_config("bf16", act="fp8_e4m3"), 384, 40, "A"),  # k40: 40 bytes in
        (_config("fp32"), 50, 512, "D"),  # n50
        (_config("bf16", swap_ab=True), 100, 512, "D"),  # swap_ab moves the same tensors
        (_config("bf16", fusion="finalize"), 384, 100, "A"),  # finalize still loads A by TMA
    ],
)
def test_a_group_start_off_16_bytes_faults(config: KernelConfig, n: int, k: int, operand: str) -> None:
    fault = predicted_fault(config, _problem(n, k))
    assert fault is not None and fault.rule == TMA_ADDRESS and fault.stage is Stage.RUN
    assert fault.detail.startswith(f"{operand} ")


@pytest.mark.parametrize(
    ("config", "n", "k", "rows", "operand"),
    [  # align-pitch: the same pitches with every expert on 16 bytes (H200: numerics, no fault)
        (_config("bf16"), 384, 100, EVEN_ROWS, "A"),  # k100e
        (_config("bf16"), 384, 100, (77,), "A"),  # k100x1: one expert, odd rows
        (_config("bf16"), 384, 100, (78,), "A"),  # k100x1e
        (_config("bf16"), 100, 512, EVEN_ROWS, "D"),  # n100e
        (_config("bf16"), 100, 512, (77,), "D"),  # n100x1
        (_config("bf16", act="fp8_e4m3"), 384, 40, EVEN_ROWS, "A"),  # k40e
        (_config("fp32"), 50, 512, EVEN_ROWS, "D"),  # n50e
        (_config("fp32"), 384, 50, EVEN_ROWS, "A"),  # k50e
        (_config("bf16", fusion="finalize"), 384, 100, EVEN_ROWS, "A"),  # finalize-k100e
    ],
)
def test_a_pitch_off_16_bytes_with_every_start_on_them_is_a_predicted_wrong_d(
    config: KernelConfig, n: int, k: int, rows: tuple[int, ...], operand: str
) -> None:
    fault = predicted_fault(config, _problem(n, k, rows))
    assert fault is not None and (fault.rule, fault.stage) == (TMA_STRIDE, Stage.NUMERICS)
    assert fault.detail.startswith(f"{PREDICTED}: {operand} ")


def test_each_group_start_is_where_tensorrt_llm_puts_it() -> None:
    """A and D: the rows of the experts before; B: e x N rows; experts without rows: none."""
    a, b, d = tma_operands(_config("bf16"), _problem(100, 100, (0, 1, 77, 300)))
    assert a.base_bits == (0, 200 * 8, 78 * 200 * 8) and a.rows == 300
    assert b.base_bits == tuple(e * 100 * 200 * 8 for e in (1, 2, 3)) and b.rows == 100
    assert d.base_bits == a.base_bits and d.pitch_bits == 200 * 8


def test_finalize_stores_d_without_tma() -> None:
    """Its D pitch is no TMA rule's business: the H200 ran finalize with n=101 to a wrong D."""
    assert [o.what[0] for o in tma_operands(_config(fusion="finalize"), _problem(101, 512))] == ["A", "B"]


@pytest.mark.parametrize("n", [101, 100])  # rows of 202 and 200 bytes (recorded on the H200: numerics)
def test_a_finalize_d_of_unaligned_rows_is_a_predicted_wrong_d(n: int) -> None:
    fault = predicted_fault(_config(fusion="finalize"), _problem(n, 512))
    assert fault is not None
    assert (fault.rule, fault.stage, fault.status) == (VECTOR_ROW, Stage.NUMERICS, MISMATCH_STATUS)
    assert fault.detail.startswith(f"{PREDICTED}: finalize D (bf16 output, rows of N=")


def test_the_tma_fault_comes_before_the_wrong_d() -> None:
    """A finalize kernel whose A faults never writes D: the fault is the verdict; a wrong A
    comes before the scatter's wrong D."""
    fault = predicted_fault(_config(fusion="finalize"), _problem(101, 100))
    assert fault is not None and fault.rule == TMA_ADDRESS
    fault = predicted_fault(_config(fusion="finalize"), _problem(102, 100, EVEN_ROWS))  # B: e x 20,400 bytes
    assert fault is not None and fault.rule == TMA_STRIDE


def test_a_finalize_d_of_one_row_or_aligned_rows_is_right() -> None:
    # one token: the vector past the row's end lands past D
    assert predicted_fault(_config(fusion="finalize"), _problem(101, 512, rows=(1,), tokens=1)) is None
    assert predicted_fault(_config(fusion="finalize"), _problem(104, 512)) is None  # 208 bytes
    assert predicted_fault(_config(fusion="finalize", out="fp32"), _problem(100, 512)) is None  # 400 bytes


def test_the_finalize_d_has_a_row_per_token() -> None:
    """tokens when the problem says, else the simulated routing's (top-8, 1/16 unrouted)."""
    finalize = _config(fusion="finalize")
    assert finalize_output(finalize, _problem(101, 512, rows=(300,), tokens=300)).rows == 300
    assert finalize_output(finalize, _problem(101, 512)).rows == 300 + 300 // 16
    assert vector_row_fault(VectorRows("D", 202 * 8, 2)) is not None
    assert vector_row_fault(VectorRows("D", 202 * 8, 1)) is None


def test_aligned_problems_and_unmodelled_archs_do_not_fault() -> None:
    assert predicted_fault(_config("bf16"), _problem(384, 512)) is None
    assert predicted_fault(_config("bf16", act="fp8_e4m3"), _problem(384, 48)) is None  # 48 fp8 bytes
    assert predicted_fault(_config("bf16", arch=100), _problem(100, 100)) is None
    assert predicted_fault(_config("bf16", arch=100, fusion="finalize"), _problem(101, 512)) is None


def _passed_run() -> tuple[VirtualRun, HarnessReport]:
    log: list[dict[str, Any]] = [{"call": "cudaLaunchKernelExC", "result": "cudaSuccess"}]
    report = HarnessReport({"final": True, "stage": "pass", "status": "Success", "smem_requested": 215040})
    return VirtualRun(0, "", "", "sm_90a", log), report


def test_a_predicted_fault_is_a_run_failure_judged_through_launch() -> None:
    fault = RunFault(TMA_ADDRESS, MISALIGNED_STATUS, "A: ...")
    verdict = verdict_of(*_passed_run(), "virtual (sm90 profile)", fault=fault)
    assert verdict.failed_stage is Stage.RUN
    assert verdict.judged_through is Stage.LAUNCH and not verdict.kernel_ran
    assert verdict.status == MISALIGNED_STATUS
    assert verdict.detail.startswith(TMA_ADDRESS)
    assert verdict.extra["run_rule"] == TMA_ADDRESS
    assert verdict.smem_requested == 215040


def test_a_predicted_wrong_d_is_a_numerics_failure_judged_through_launch() -> None:
    """Never unrun, never pass: the rule's numerics failure, the kernel not run."""
    fault = vector_row_fault(VectorRows("finalize D", 202 * 8, 300))
    assert fault is not None
    verdict = verdict_of(*_passed_run(), "virtual (sm90 profile)", fault=fault)
    assert verdict.failed_stage is Stage.NUMERICS and verdict.outcome == "numerics"
    assert verdict.judged_through is Stage.LAUNCH and not verdict.kernel_ran and not verdict.unrun
    assert verdict.status == MISMATCH_STATUS
    assert verdict.detail.startswith(f"{VECTOR_ROW}: {PREDICTED}")
    assert verdict.extra["run_rule"] == VECTOR_ROW


def test_without_a_fault_a_pass_stays_a_pass() -> None:
    assert verdict_of(*_passed_run(), "virtual (sm90 profile)").passed
