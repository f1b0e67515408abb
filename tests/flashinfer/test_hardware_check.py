"""The hardware path's check of D, on the CPU: the runner's part is played by a stand-in that
writes the D of the test's choosing, so everything after the kernel runs as on a GPU host."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers.cases import make_case
from helpers.numerics_standin import inputs_in

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.numerics.full import expected_for
from pytest_tileconform.flashinfer.numerics.reference import (
    make_inputs,
    output_dtype,
    poison_output,
)
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.verdict import Stage, Verdict


def judge_with_output(
    backend: FlashInferBackend,
    case: MoeCase,
    output: Callable[[torch.Tensor], torch.Tensor],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Verdict:
    """``backend``'s hardware verdict on ``case`` when the kernel writes ``output(reference)``."""

    def execute(_build: BuildResult, run_dir: Path, _name: str) -> tuple[HarnessReport, str | None]:
        inputs = inputs_in(run_dir, case, backend.settings.seed)  # either family's
        expected = expected_for(inputs, case).value
        (run_dir / "d.bin").write_bytes(_le_bytes(output(expected).to(output_dtype(case.out))))
        fields = {"stage": "pass", "kernel_ms": 0.01, "smem_requested": 1024, "smem_limit": 232448}
        return HarnessReport(fields), None

    monkeypatch.setattr(backend, "_execute", execute)
    backend._gpu = Gpu(index="0", uuid="GPU-stand-in", name="Stand-in", sm=90, driver="0")
    try:
        return backend._run(case, BuildResult(ok=True, path=tmp_path, seconds=0.0), {})
    finally:
        backend.finish()


@pytest.mark.parametrize("fusion", ["none", "finalize"])
def test_a_correct_output_passes_and_says_where_the_time_went(
    fusion: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend_settings: Callable[..., Settings],
) -> None:
    backend = FlashInferBackend(backend_settings(device="hardware"), progress=lambda _msg: None)
    case = make_case(fusion=fusion)
    verdict = judge_with_output(backend, case, lambda d: d, tmp_path, monkeypatch)
    assert verdict.failed_stage is None and verdict.judged_through is Stage.NUMERICS
    assert verdict.extra["numerics"].startswith("ok: 0/")
    assert verdict.extra["numerics_full"].startswith("ok: 0/")
    seconds = verdict.extra["seconds"]
    parts = {"inputs", "harness", "check", "check_read", "check_reference", "check_compare", "gc", "full"}
    assert set(seconds) == parts and all(value >= 0 for value in seconds.values())
    assert seconds["check"] >= seconds["check_reference"]
    assert set(verdict.extra["check_usage"]) == {"minor_faults", "major_faults", "involuntary_switches"}
    assert verdict.smem_requested == 1024


def test_a_wrong_output_fails_at_numerics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    backend = FlashInferBackend(backend_settings(device="hardware"), progress=lambda _msg: None)
    verdict = judge_with_output(backend, make_case(), lambda d: d * 1.5 + 1, tmp_path, monkeypatch)
    assert verdict.failed_stage is Stage.NUMERICS and verdict.status == "mismatch"
    assert "MISMATCH" in verdict.detail


@pytest.mark.parametrize("fusion", ["none", "finalize"])
def test_one_element_one_ulp_off_fails_at_numerics(
    fusion: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """No budget of bad elements: one ulp in one element of an exact result is a mismatch, and
    the verdict says so in ulps (a finalize row that receives one permuted row is exact too)."""
    backend = FlashInferBackend(backend_settings(device="hardware"), progress=lambda _msg: None)
    case = make_case(fusion=fusion, rows=[3, 0, 5])
    inputs = make_inputs(case, backend.settings.seed)
    # without fusion any row; with finalize a token that receives one row
    fan_in = None if inputs.dest_row is None else torch.bincount(inputs.dest_row.long())
    row = 0 if fan_in is None else int((fan_in == 1).nonzero()[0])

    def one_ulp_off(d: torch.Tensor) -> torch.Tensor:
        stored = d.to(output_dtype(case.out))
        stored[row, 0] = torch.nextafter(stored[row, 0], torch.tensor(math.inf, dtype=stored.dtype))
        return stored.double()

    verdict = judge_with_output(backend, case, one_ulp_off, tmp_path, monkeypatch)
    assert verdict.failed_stage is Stage.NUMERICS and verdict.status == "mismatch"
    assert verdict.detail.startswith("MISMATCH: 1/") and "max 1 ulp of bfloat16" in verdict.detail
    assert f"worst at ({row}, 0)" in verdict.detail


def test_an_unwritten_d_is_named_in_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    backend = FlashInferBackend(backend_settings(device="hardware"), progress=lambda _msg: None)
    case = make_case()
    inputs = make_inputs(case, backend.settings.seed)
    poison = poison_output(inputs.out_rows, inputs.n, case.out)
    verdict = judge_with_output(backend, case, lambda _d: poison, tmp_path, monkeypatch)
    total = inputs.out_rows * inputs.n
    assert verdict.failed_stage is Stage.NUMERICS
    assert f"{total}/{total} over the bound ({total} non-finite, {total} unwritten)" in verdict.detail
