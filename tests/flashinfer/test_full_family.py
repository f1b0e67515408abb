"""The full-mantissa input family on the hardware path: every case judged on a GPU runs once more
on those inputs (no other stage, no timing) and its D must lie in their interval; the harness is
played by a stand-in that computes D as a kernel would (numerics_standin.py), so everything
around it runs as on a GPU host."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers.cases import make_case
from helpers.harness_stand_in import GPU, no_sanitizer, passed
from helpers.numerics_standin import kernel, operands

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.flashinfer import hardware
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.numerics.full import EXACT, FULL, check_generatable
from pytest_tileconform.flashinfer.numerics.prepared import DEFAULT_CACHE_BYTES, InputCache, Prepared
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.verdict import Stage, Verdict

#: a kernel: inputs -> D in the output dtype
Kernel = Callable[[Prepared], torch.Tensor]


class Harness:
    """Plays the harness: computes D of whichever family's inputs it was handed (told apart by
    a.bin's bytes) with ``kernels[family]``; remembers each run's problem.txt."""

    def __init__(self, prepared: dict[str, Prepared], kernels: dict[str, Kernel]) -> None:
        self.prepared, self.kernels = prepared, kernels
        self.problems: dict[str, str] = {}

    def __call__(self, _build: BuildResult, run_dir: Path, _name: str) -> tuple[HarnessReport, str | None]:
        a = (run_dir / "a.bin").read_bytes()
        family = next(f for f, p in self.prepared.items() if _le_bytes(p.inputs.a) == a)
        self.problems[family] = (run_dir / "problem.txt").read_text()
        (run_dir / "d.bin").write_bytes(_le_bytes(self.kernels[family](self.prepared[family])))
        (run_dir / "verdict.json").write_text(json.dumps(passed()))
        return HarnessReport.read(run_dir), None


def correct(p: Prepared) -> torch.Tensor:
    return kernel(p.inputs)


def judge(
    case: MoeCase, settings: Settings, kernels: dict[str, Kernel]
) -> tuple[Verdict, Harness, list[Path]]:
    cache = InputCache(DEFAULT_CACHE_BYTES)
    prepared = {family: cache.get(case, settings.seed, "cpu", family) for family in (EXACT, FULL)}
    harness = Harness(prepared, kernels)
    runs: list[Path] = []
    build = BuildResult(ok=True, path=Path("/nonexistent"), seconds=0.0)
    verdict = hardware.judge(
        case,
        prepared[EXACT],
        build,
        {},
        GPU,
        settings,
        harness,
        lambda _c, run_dir: runs.append(run_dir),
        no_sanitizer,
        full=prepared[FULL],
    )
    return verdict, harness, runs


@pytest.fixture
def settings(backend_settings: Callable[..., Settings]) -> Settings:
    return backend_settings(device="hardware", timing_iters=5, graph_replays=0, repeats=0)


@pytest.mark.parametrize(("dtype", "fusion"), [("bf16", "none"), ("fp8_e4m3", "finalize"), ("nvfp4", "none")])
def test_a_correct_kernel_passes_both_families(settings: Settings, dtype: str, fusion: str) -> None:
    out = "bf16" if dtype != "bf16" else None
    case = make_case(dtype, rows=[40, 0, 30], n=64, k=256, fusion=fusion, out=out)
    verdict, harness, runs = judge(case, settings, {EXACT: correct, FULL: correct})
    assert verdict.passed, verdict.describe()
    assert verdict.extra["numerics"].startswith("ok") and verdict.extra["numerics_full"].startswith("ok")
    assert len(runs) == 2 and verdict.extra["launches"] == 1 + 5 + 1
    once = dict(line.split(" ", 1) for line in harness.problems[FULL].splitlines())
    assert (once["timing_iters"], once["graph_replays"], once["repeats"]) == ("0", "0", "0")
    assert "timing_iters 5" in harness.problems[EXACT]


def test_precision_lost_fails_numerics_on_the_full_family_alone(settings: Settings) -> None:
    """alpha held in bf16: the exact family's alphas have four significant bits, so its D does
    not move; the full family's have 24 and its D does."""
    case = make_case("fp8_e4m3", rows=[40, 0, 30], n=64, k=256, out="bf16")

    def bf16_alpha(p: Prepared) -> torch.Tensor:
        ops = operands(p.inputs)
        assert ops.alpha is not None
        return kernel(p.inputs, replace(ops, alpha=ops.alpha.to(torch.bfloat16).float()))

    exact = InputCache(DEFAULT_CACHE_BYTES).get(case, 0)
    assert torch.equal(bf16_alpha(exact).view(torch.int16), correct(exact).view(torch.int16))
    verdict, _, _ = judge(case, settings, {EXACT: bf16_alpha, FULL: bf16_alpha})
    assert verdict.failed_stage is Stage.NUMERICS and verdict.status == "mismatch"
    assert verdict.detail.startswith("full-mantissa inputs: MISMATCH")
    assert verdict.extra["numerics"].startswith("ok")


def test_a_case_without_a_full_family_says_so(settings: Settings) -> None:
    case = make_case("fp8_e4m3", weight="int4", rows=[40, 0, 30], n=64, k=256, out="bf16")
    with pytest.raises(NotImplementedError, match="mixed input"):
        check_generatable(case)
    build = BuildResult(ok=True, path=Path("/nonexistent"), seconds=0.0)
    prepared = InputCache(DEFAULT_CACHE_BYTES).get(case, 0)
    harness = Harness({EXACT: prepared}, {EXACT: lambda p: p.expected().bits})
    reason = "not generated: the full family is not generated for SM90's mixed input (fp8_e4m3 x int4)"
    verdict = hardware.judge(
        case, prepared, build, {}, GPU, settings, harness, lambda _c, _d: None, no_sanitizer, full=reason
    )
    assert verdict.passed, verdict.describe()
    assert verdict.extra["numerics_full"] == reason
