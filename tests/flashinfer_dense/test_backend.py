"""The dense backend's decisions that need no compile: how far a case is judged per device, a
configuration FlashInfer does not offer as a verdict of its own, and a choice of sources it cannot
honour refused before anything is built."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.backend import DenseBackend
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.verdict import Stage, UnusableEnvironment

CASE: Case[DenseAxes] = Case(
    Path("m.yaml"), "dense", "sm120", "mxfp8", "mxfp8", "bf16", "mxfp8-bf16", (256, 128, 128),
    DenseAxes(False, (256, 256, 512)), None, None,
)  # fmt: skip


def backend(settings: Callable[..., Any], device: str, refusal: str | None = None) -> DenseBackend:
    return DenseBackend(settings(device=device), None, lambda _message: None, refusal=refusal)


def test_how_far_each_device_judges(backend_settings: Callable[..., Any]) -> None:
    assert backend(backend_settings, "virtual").judged_through(CASE) is Stage.LAUNCH
    assert backend(backend_settings, "compile").judged_through(CASE) is Stage.COMPILE
    assert backend(backend_settings, "virtual:sm100").judged_through(CASE) is None


def test_a_tile_flashinfer_does_not_offer_is_a_verdict_without_a_build(
    backend_settings: Callable[..., Any], tmp_path: Path
) -> None:
    verdict = backend(backend_settings, "virtual").judge(CASE)  # FlashInfer 0.7.4 dropped 256x128x128
    assert (verdict.failed_stage, verdict.status) == (Stage.COMPILE, "not offered")
    assert "offers no tactic of CTA 256x128x128" in verdict.detail
    assert not (tmp_path / "cache").exists()


def test_sources_it_cannot_honour_stop_before_any_case(backend_settings: Callable[..., Any]) -> None:
    with pytest.raises(UnusableEnvironment, match="no dense templates here"):
        backend(backend_settings, "virtual", "no dense templates here").check_environment([CASE])
