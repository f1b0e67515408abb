"""The dense backend's decisions that need no compile: how far a case is judged per device, a
configuration FlashInfer does not offer as a verdict of its own, a choice of sources it cannot
honour refused before anything is built, and the units a run plans (the same whichever cases a
process is given)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.compile.cache import BuildResult, BuildSpec
from pytest_tileconform.flashinfer.sources import find_cuda_home, find_sources
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.backend import DenseBackend
from pytest_tileconform.flashinfer_dense.offered import read_offered
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


class Planned:
    """A build cache that records the units a backend asks for and builds none."""

    def __init__(self) -> None:
        self.specs: list[BuildSpec] = []

    def build(self, specs: Sequence[BuildSpec], jobs: int, **_: Any) -> dict[str, BuildResult]:
        self.specs += specs
        return {}


def planned(settings: Callable[..., Any], cases: Sequence[Case[DenseAxes]]) -> dict[str, str]:
    """The units :meth:`DenseBackend.prepare` asks the cache for (key -> label), in a process of
    its own; no runtime is built (the toolchain's runtime and salt are fixed here)."""
    found = backend(settings, "virtual")
    found.__dict__["toolchain"] = (find_cuda_home(), Path("/x-cache/vcudart/libvcudart.a"), "salt")
    found.cache = cache = Planned()  # type: ignore[assignment]
    found.prepare(cases)
    return {spec.key: spec.label for spec in cache.specs}


def test_a_unit_is_planned_alike_whichever_cases_a_process_has(backend_settings: Callable[..., Any]) -> None:
    """FlashInfer's 32 SM120 fp4 tactics in both output types are 16 units (one per output type and
    tile), under the same keys whether one process plans them all, in either order, each output
    type alone or each case alone (as a cold run one unit at a time does): a warm run finds every
    unit those runs built."""
    family = read_offered(find_sources()).family("fp4_gemm_cutlass_sm120")
    cases = [
        Case(
            Path("m.yaml"),
            "dense",
            "sm120",
            "nvfp4",
            "nvfp4",
            out,
            f"nvfp4-{out}",
            t.cta,
            DenseAxes(t.swap_ab, (256, 256, 512), t.stream_k),
            None,
            None,
        )
        for out in ("bf16", "fp16")
        for t in family.tactics
    ]
    whole = planned(backend_settings, cases)
    assert len(cases) == 64 and len(whole) == 16
    assert {label.split()[1] for label in whole.values()} == {"bf16", "fp16"}
    assert planned(backend_settings, cases[::-1]) == whole
    by_out = {out: [c for c in cases if c.out == out] for out in ("bf16", "fp16")}
    assert {**planned(backend_settings, by_out["fp16"]), **planned(backend_settings, by_out["bf16"])} == whole
    one_unit = {}
    for case in cases:
        alone = planned(backend_settings, [case])
        assert alone.items() <= whole.items()
        one_unit.update(alone)
    assert one_unit == whole
