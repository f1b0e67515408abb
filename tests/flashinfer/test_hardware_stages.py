"""The hardware stages after numerics (graph, repeat, sequence, sanitize), how a case is launched (PDL) and
what its verdict records, on the CPU: a stand-in plays the harness (it writes verdict.json, D and
the D a replaying stage saved, as harness.cu does), so everything around it runs as on a GPU
host; and the options that turn the stages on, checked at startup."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.cases import make_case
from helpers.harness_stand_in import GPU, no_sanitizer, passed
from helpers.paths import SMOKE

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.flashinfer import hardware
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.harness_report import HarnessReport
from pytest_tileconform.flashinfer.numerics.prepared import DEFAULT_CACHE_BYTES, InputCache
from pytest_tileconform.flashinfer.numerics.reference import expected_output, make_inputs, output_dtype
from pytest_tileconform.flashinfer.numerics.runfiles import _le_bytes
from pytest_tileconform.flashinfer.sanitizer import SanitizerRun
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.verdict import Stage, Verdict


def d_bytes(case: MoeCase, change: Callable[[torch.Tensor], torch.Tensor] = lambda d: d) -> bytes:
    """D as the kernel writes it for ``case`` (seed 0), after ``change``."""
    expected = expected_output(make_inputs(case, 0), case).value
    return _le_bytes(change(expected).to(output_dtype(case.out)))


class Harness:
    """Plays the harness: ``fields`` become verdict.json, ``files`` are written into the run
    directory; remembers the problem.txt it was given."""

    def __init__(self, fields: dict[str, Any], files: dict[str, bytes], failure: str | None = None) -> None:
        self.fields, self.files, self.failure = fields, files, failure
        self.problem = ""

    def __call__(self, _build: BuildResult, run_dir: Path, _name: str) -> tuple[HarnessReport, str | None]:
        self.problem = (run_dir / "problem.txt").read_text()
        for name, data in self.files.items():
            (run_dir / name).write_bytes(data)
        (run_dir / "verdict.json").write_text(json.dumps(self.fields))
        return HarnessReport.read(run_dir), self.failure


def replays(runs: int, changed: int = 0, saved: str | None = None) -> dict[str, Any]:
    return {"runs": runs, "changed_runs": changed, "most_changed_elements": 7 * changed, "saved": saved}


def judge(
    case: MoeCase,
    harness: Harness,
    settings: Settings,
    sanitize: hardware.Sanitize = no_sanitizer,
) -> Verdict:
    build = BuildResult(ok=True, path=Path("/nonexistent"), seconds=0.0)
    prepared = InputCache(DEFAULT_CACHE_BYTES).get(case, settings.seed)
    return hardware.judge(case, prepared, build, {}, GPU, settings, harness, lambda _c, _d: None, sanitize)


@pytest.fixture
def settings(backend_settings: Callable[..., Settings]) -> Settings:
    return backend_settings(device="hardware")


def test_a_passing_case_records_how_it_was_launched_and_judged(settings: Settings) -> None:
    case = make_case()
    harness = Harness(passed(graph=replays(8), repeat=replays(3)), {"d.bin": d_bytes(case)})
    verdict = judge(case, harness, settings)
    assert verdict.passed and verdict.judged_through is Stage.REPEAT
    extra = verdict.extra
    assert (extra["seed"], extra["problem"], extra["pdl"]) == (0, case.axes.problem.flow(), True)
    assert (extra["graph_replays"], extra["repeats"], extra["kernel_ms"]) == (8, 3, 0.0125)
    assert extra["stages"] == ["numerics", "graph", "repeat"]
    assert extra["graph"] == replays(8) and "sanitizer" not in extra
    problem = dict(line.split(" ", 1) for line in harness.problem.splitlines())
    assert (problem["enable_pdl"], problem["graph_replays"], problem["repeats"]) == ("1", "8", "3")


@pytest.mark.parametrize(
    ("pdl", "line"), [(None, "enable_pdl 1"), (True, "enable_pdl 1"), (False, "enable_pdl 0")]
)
def test_pdl_is_the_cases_or_flashinfers_default_for_the_arch(
    settings: Settings, pdl: bool | None, line: str
) -> None:
    case = dataclasses.replace(case := make_case(), axes=dataclasses.replace(case.axes, pdl=pdl))
    harness = Harness(passed(), {"d.bin": d_bytes(case)})
    verdict = judge(case, harness, settings)
    assert line in harness.problem.splitlines() and verdict.extra["pdl"] is (pdl is not False)


@pytest.mark.parametrize(
    ("dynamic", "lines"),
    [
        (None, set()),
        ((1, 1, 1), {"cluster_shape 1 1", "fallback_cluster_shape 1 1"}),
        ((4, 2, 1), {"cluster_shape 4 2", "fallback_cluster_shape 2 1"}),
    ],
)
def test_a_dynamic_cluster_reaches_the_harness_with_flashinfers_fallback(
    settings: Settings, dynamic: tuple[int, int, int] | None, lines: set[str]
) -> None:
    case = dataclasses.replace(
        case := make_case(), axes=dataclasses.replace(case.axes, dynamic_cluster=dynamic)
    )
    harness = Harness(passed(), {"d.bin": d_bytes(case)})
    judge(case, harness, settings)
    given = {line for line in harness.problem.splitlines() if "cluster" in line}
    assert given == lines


def test_without_graph_and_repeat_the_verdict_goes_through_numerics(settings: Settings) -> None:
    """Asked for no such stage (the harness then reports none), or given no record of them."""
    case = make_case()
    harness = Harness(passed(), {"d.bin": d_bytes(case)})
    verdict = judge(case, harness, dataclasses.replace(settings, graph_replays=0, repeats=0))
    assert verdict.passed and verdict.judged_through is Stage.NUMERICS
    assert verdict.extra["stages"] == ["numerics"]
    assert "graph_replays 0" in harness.problem and "repeats 0" in harness.problem


def test_the_sequence_stage_runs_after_repeat_when_asked_for(settings: Settings) -> None:
    """``--tile-sequence N``: the harness gets ``sequence N N`` (N runs alone, N pairs, N graph
    replays of a pair: 3N D's compared), and the verdict speaks for the stage it reported."""
    case = make_case()
    fields = passed(graph=replays(8), repeat=replays(3), sequence=replays(3000))
    harness = Harness(fields, {"d.bin": d_bytes(case)})
    verdict = judge(case, harness, dataclasses.replace(settings, sequence=1000))
    assert verdict.passed and verdict.judged_through is Stage.SEQUENCE
    assert verdict.extra["stages"] == ["numerics", "graph", "repeat", "sequence"]
    assert verdict.extra["sequence"] == replays(3000) and verdict.extra["launches"] == 1 + 8 + 3 + 3000
    assert "sequence 1000 1000" in harness.problem.splitlines()
    harness = Harness(passed(), {"d.bin": d_bytes(case)})
    judge(case, harness, settings)
    assert "sequence" not in harness.problem


@pytest.mark.parametrize("stage", ["graph", "repeat", "sequence"])
def test_a_deterministic_epilogue_must_give_the_same_d_every_run(settings: Settings, stage: str) -> None:
    case = make_case()
    good = d_bytes(case)
    fields = passed(**{stage: replays(8, changed=2, saved=f"d.{stage}.bin")})
    verdict = judge(case, Harness(fields, {"d.bin": good, f"d.{stage}.bin": good[:-2] + b"\0\0"}), settings)
    assert verdict.failed_stage is Stage(stage) and verdict.status == "changed"
    assert f"2 of 8 {stage} runs changed D (up to 14 elements)" in verdict.detail
    assert "deterministic" in verdict.detail


def test_a_reduction_may_change_d_within_what_its_order_allows(settings: Settings) -> None:
    """Finalize with several rows per token (red.add): a replay's D differs, and the one that
    changed most is checked against the reference instead."""
    case = make_case(fusion="finalize", rows=[40, 0, 30])
    good = d_bytes(case)
    fields = passed(graph=replays(8, changed=3, saved="d.graph.bin"), problem={"use_reduction": True})
    verdict = judge(case, Harness(fields, {"d.bin": good, "d.graph.bin": good}), settings)
    assert verdict.passed, verdict.describe()
    wrong = d_bytes(case, lambda d: d * 1.5)
    verdict = judge(case, Harness(fields, {"d.bin": good, "d.graph.bin": wrong}), settings)
    assert verdict.failed_stage is Stage.GRAPH and "beyond what the reduction order allows" in verdict.detail


@pytest.mark.parametrize("stage", ["graph", "repeat", "sequence"])
def test_a_runner_that_dies_in_a_later_stage_fails_there_unless_d_was_wrong(
    settings: Settings, stage: str
) -> None:
    case = make_case()
    fields = {"final": False, "stage": stage, "status": "incomplete"}
    died = "harness killed by SIGSEGV"
    verdict = judge(case, Harness(fields, {"d.bin": d_bytes(case)}, died), settings)
    assert (verdict.failed_stage, verdict.status) == (Stage(stage), died)
    wrong = d_bytes(case, lambda d: d + 1)
    verdict = judge(case, Harness(fields, {"d.bin": wrong}, died), settings)
    assert verdict.failed_stage is Stage.NUMERICS


@pytest.mark.parametrize("stage", ["graph", "sequence"])
def test_a_fault_in_a_replay_is_that_stages_verdict(settings: Settings, stage: str) -> None:
    case = make_case()
    fields = {"final": True, "stage": stage, "status": "cudaErrorIllegalAddress", "message": "replay 3"}
    verdict = judge(case, Harness(fields, {"d.bin": d_bytes(case)}), settings)
    assert (verdict.failed_stage, verdict.status) == (Stage(stage), "cudaErrorIllegalAddress")


def test_a_pending_error_before_the_case_fails_it_at_prepare_and_is_recorded(settings: Settings) -> None:
    case = make_case()
    cleared = [{"when": "before the case", "name": "cudaErrorMemoryAllocation", "string": "out of memory"}]
    fields = {
        "final": True,
        "stage": "prepare",
        "status": "cudaErrorMemoryAllocation",
        "message": "a CUDA error was pending before the case (cleared): out of memory",
        "cleared_errors": cleared,
    }
    verdict = judge(case, Harness(fields, {}), settings)
    assert (verdict.failed_stage, verdict.status) == (Stage.PREPARE, "cudaErrorMemoryAllocation")
    assert verdict.extra["cleared_errors"] == cleared


@pytest.mark.parametrize(
    ("run", "outcome", "through"),
    [
        (
            SanitizerRun("memcheck", "clean", 0, "/r/sanitizer.log", "ERROR SUMMARY: 0 errors"),
            None,
            Stage.SANITIZE,
        ),
        (
            SanitizerRun("racecheck", "errors", 2, "/r/sanitizer.log", "2 errors"),
            Stage.SANITIZE,
            Stage.SANITIZE,
        ),
        (SanitizerRun("memcheck", "failed", None, None, "timeout after 10s"), Stage.SANITIZE, Stage.SANITIZE),
        (SanitizerRun("initcheck", "unavailable", summary="no compute-sanitizer"), None, Stage.REPEAT),
    ],
)
def test_the_sanitize_stage(
    settings: Settings, run: SanitizerRun, outcome: Stage | None, through: Stage
) -> None:
    """A host without compute-sanitizer says so in the verdict, which then does not claim the
    stage was judged."""
    case = make_case()
    asked: list[str] = []

    def sanitize(_build: BuildResult, _run_dir: Path, name: str) -> SanitizerRun:
        asked.append(name)
        return run

    sanitizing = dataclasses.replace(settings, sanitize=run.mode)
    fields = passed(graph=replays(8), repeat=replays(3))
    verdict = judge(case, Harness(fields, {"d.bin": d_bytes(case)}), sanitizing, sanitize)
    assert (verdict.failed_stage, verdict.judged_through) == (outcome, through)
    assert verdict.extra["sanitizer"] == run.as_dict() and len(asked) == 1
    assert ("sanitize" in verdict.extra["stages"]) is (run.result != "unavailable")


def test_the_sanitize_stage_waits_for_numerics(settings: Settings) -> None:
    case = make_case()
    sanitizing = dataclasses.replace(settings, sanitize="memcheck")
    verdict = judge(case, Harness(passed(), {"d.bin": d_bytes(case, lambda d: d * 2)}), sanitizing)
    assert verdict.failed_stage is Stage.NUMERICS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tile-graph-replays=-1"], "--tile-graph-replays -1: must be between 0 and 10,000"),
        (["--tile-repeats", "10001"], "--tile-repeats 10001: must be between 0 and 10,000"),
        (["--tile-sequence", "-5"], "--tile-sequence -5: must be between 0 and 10,000"),
        (["--tile-sanitize", "leakcheck"], "--tile-sanitize leakcheck: must be one of memcheck, racecheck"),
    ],
)
def test_bad_stage_options_are_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest("--tile-matrix", str(SMOKE), "-p", "no:xdist", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_the_stage_options_reach_the_backend(pytester: pytest.Pytester) -> None:
    from pytest_tileconform.core.inikeys import resolve
    from pytest_tileconform.core.runconfig import run_options
    from pytest_tileconform.flashinfer.plugin import pytest_tileconform_register_backends

    config = pytester.parseconfig(
        "--tile-matrix",
        str(SMOKE),
        "--tile-device",
        "compile",
        "--tile-graph-replays",
        "2",
        "--tile-repeats",
        "0",
        "--tile-sanitize",
        "synccheck",
        "--tile-sequence",
        "1000",
    )
    resolve(config)
    (backend,) = pytest_tileconform_register_backends(config, run_options(config))
    settings = backend.settings
    assert (settings.graph_replays, settings.repeats, settings.sanitize, settings.sequence) == (
        2,
        0,
        "synccheck",
        1000,
    )
