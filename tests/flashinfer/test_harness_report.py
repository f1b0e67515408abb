"""The harness's verdict.json as the FlashInfer backend reads it (one map of stage names for the
hardware run and the virtual device), the device every verdict names, and the unit planner as a
free function."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.cases import make_case

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer import hardware
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.codegen import HARNESS_DIR
from pytest_tileconform.flashinfer.configs import UnsupportedConfig
from pytest_tileconform.flashinfer.harness_report import STAGES, VERDICT_FILE, HarnessReport
from pytest_tileconform.flashinfer.numerics.prepared import DEFAULT_CACHE_BYTES, InputCache
from pytest_tileconform.flashinfer.planner import plan_units
from pytest_tileconform.flashinfer.sanitizer import SanitizerRun
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.flashinfer.sources import FlashInferSources
from pytest_tileconform.verdict import Device, Stage, Verdict
from pytest_tileconform.virtual.profiles import builtin
from pytest_tileconform.virtual.run import VirtualRun, verdict_of

GB = 1_000_000_000


def _harness_source() -> str:
    return "".join(path.read_text() for path in sorted(HARNESS_DIR.iterdir()) if path.suffix in (".cu", ".h"))


def _harness_stage_names() -> set[str]:
    """Every stage name the harness can write: assigned, thrown, a launcher message's, a
    preliminary verdict's or the stage argument of a step that throws."""
    source = _harness_source()
    return {
        *re.findall(r'stage = "(\w+)"', source),
        *re.findall(r'StageError\("(\w+)"', source),
        *re.findall(r'\{"[^"]+", "(\w+)"\}', source),
        *re.findall(r'running\(run_dir, verdict, "(\w+)"', source),
        *re.findall(r'(?:reset_d|finish)\("(\w+)"\)', source),
    }


def test_the_stage_map_covers_exactly_what_the_harness_writes() -> None:
    names = _harness_stage_names()
    assert names - set(STAGES) == {"setup", "pass"}  # no stage of the case: a fault, or none
    assert set(STAGES) <= names
    assert {"prepare", "graph", "repeat", "sequence"} <= names


def test_the_poison_is_the_one_the_numerics_check_knows() -> None:
    """The harness fills memory with kPoisonByte; the check of D recognises unwritten elements
    by tolerance.POISON_BYTE: two languages, one value."""
    from pytest_tileconform.flashinfer.numerics.tolerance import POISON_BYTE

    found = re.findall(r"constexpr unsigned char kPoisonByte = (0x[0-9A-Fa-f]+);", _harness_source())
    assert [int(value, 16) for value in found] == [POISON_BYTE]


def test_a_missing_or_broken_report_is_empty(tmp_path: Path) -> None:
    assert HarnessReport.read(tmp_path) == HarnessReport()
    (tmp_path / VERDICT_FILE).write_text("{not json")
    report = HarnessReport.read(tmp_path)
    assert (report.final, report.name, report.stage, report.passed) == (False, None, None, False)
    (tmp_path / VERDICT_FILE).write_text(
        json.dumps({"final": True, "stage": "prepare", "status": "exception"})
    )
    report = HarnessReport.read(tmp_path)
    assert (report.stage, report.outside_cutlass, report.status) == (Stage.PREPARE, True, "exception")


@pytest.mark.parametrize(
    ("fields", "interrupted", "decided"),
    [
        ({"final": False, "stage": "run"}, Stage.RUN, False),
        ({"final": False, "stage": "graph"}, Stage.GRAPH, False),
        ({"final": False, "stage": "repeat"}, Stage.REPEAT, False),
        ({"final": False, "stage": "sequence"}, Stage.SEQUENCE, False),
        ({"final": True, "stage": "graph"}, None, False),
        ({"final": True, "stage": "prepare"}, None, True),
        ({"final": True, "stage": "initialize"}, None, True),
        ({"final": True, "stage": "pass"}, None, False),
        ({}, None, False),
    ],
)
def test_where_a_harness_process_ended(
    fields: dict[str, Any], interrupted: Stage | None, decided: bool
) -> None:
    """A preliminary verdict names the stage the process was in when it ended; a final one
    before the kernel ran decides the case whatever became of the process afterwards."""
    report = HarnessReport(fields)
    assert (report.interrupted_stage, report.decided_before_run) == (interrupted, decided)


def _hardware(fields: dict[str, Any], backend_settings: Callable[..., Settings], tmp_path: Path) -> Verdict:
    """The hardware verdict when the harness reports ``fields`` and the runner is fine."""
    gpu = Gpu(index="0", uuid="GPU-stand-in", name="NVIDIA H200", sm=90, driver="0")

    def execute(_build: BuildResult, _run_dir: Path, _name: str) -> tuple[HarnessReport, str | None]:
        return HarnessReport(fields), None

    def sanitize(_build: BuildResult, _run_dir: Path, _name: str) -> SanitizerRun:
        raise AssertionError("no sanitize stage without --tile-sanitize")

    build = BuildResult(ok=True, path=tmp_path, seconds=0.0)
    settings = backend_settings(device="hardware")
    case = make_case()
    prepared = InputCache(DEFAULT_CACHE_BYTES).get(case, settings.seed)
    return hardware.judge(case, prepared, build, {}, gpu, settings, execute, lambda _c, _d: None, sanitize)


def _virtual(fields: dict[str, Any]) -> Verdict:
    profile = builtin("sm120")
    run = VirtualRun(1, "", "", "sm_120a", [])
    return verdict_of(run, HarnessReport(fields), "virtual (sm120 profile)", profile.device)


def test_a_refused_preparation_is_the_prepare_stage_never_can_implement(
    backend_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """On a GPU a failed preparation of the launcher's inputs (the harness's own, or the
    launcher's checks of what it was given, before CUTLASS) is the prepare stage, so an update
    never writes it into a matrix as a tile rejection; on a virtual device it may answer to
    the runtime rather than the case, so no verdict comes of it."""
    fields = {"final": True, "stage": "prepare", "status": "exception", "message": "swap_ab mismatch"}
    verdict = _hardware(fields, backend_settings, tmp_path)
    assert (verdict.failed_stage, verdict.detail) == (Stage.PREPARE, "swap_ab mismatch")
    with pytest.raises(RuntimeError, match="virtual harness stopped at 'prepare': exception: swap_ab"):
        _virtual(fields)
    assert _virtual({**fields, "stage": "can_implement"}).failed_stage is Stage.CAN_IMPLEMENT


def test_verdicts_name_their_device(backend_settings: Callable[..., Settings], tmp_path: Path) -> None:
    hardware_verdict = _hardware({"final": True, "stage": "initialize"}, backend_settings, tmp_path)
    assert hardware_verdict.device == Device("hardware", "NVIDIA H200", "sm90", "9.0")
    assert hardware_verdict.source == "hardware (NVIDIA H200, CC 9.0)"
    virtual_verdict = _virtual({"final": True, "stage": "pass"})
    assert virtual_verdict.device == Device("virtual", "virtual sm120", "sm120", "12.0")
    assert Verdict.from_json(virtual_verdict.to_json()).device == virtual_verdict.device

    backend = FlashInferBackend(backend_settings(device="compile"), progress=lambda _msg: None)
    backend._sources = FlashInferSources(root=tmp_path, version="0.7.4")
    backend.__dict__["_incompatibility"] = None
    built = BuildResult(ok=True, path=tmp_path, seconds=0.0)
    backend._build = lambda case: built  # type: ignore[method-assign]
    compiled = backend.judge(make_case())
    assert (compiled.source, compiled.device) == ("compile only", Device("build", "compile only"))
    failed = BuildResult(
        ok=False, path=tmp_path, seconds=0.0, first_error="cutlass/include/cute/layout.hpp(3): error: too big"
    )
    backend._build = lambda case: failed  # type: ignore[method-assign]
    error = backend.judge(make_case())
    assert (error.failed_stage, error.device) == (Stage.COMPILE, Device("build", "nvcc"))
    unsupported = backend._unsupported(UnsupportedConfig("no such tile"))
    assert unsupported.device == Device("build", "codegen")


def test_plan_units_is_the_backends_plan_for_a_given_host(
    backend_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sm90 matrix's shape (5 dtypes of 72) on a 16-core host with 134 GB: 20 units of 18,
    each of one dtype; the backend plans the same for this host's cores and memory."""
    dtypes = [
        ("bf16", "bf16"),
        ("fp16", "fp16"),
        ("fp32", "fp32"),
        ("fp8_e4m3", "bf16"),
        ("fp8_e4m3", "fp16"),
    ]
    cases = [
        replace(
            c := make_case(dtype=act, out=out),
            tile=(128, 16 * (1 + i % 4), 64),
            axes=replace(c.axes, swap_ab=i >= 36),
        )
        for i in range(72)
        for act, out in dtypes
    ]
    units = plan_units(cases, 36, cores=16, memory=134 * GB, jobs=None)
    assert [len(unit) for unit in units] == [18] * 20
    assert all(len({(c.act, c.out) for c in unit}) == 1 for unit in units)
    assert sorted(map(id, (c for unit in units for c in unit))) == sorted(map(id, cases))
    assert [len(u) for u in plan_units(cases, 36, cores=16, memory=134 * GB, jobs=1)] == [36, 36] * 5

    backend = FlashInferBackend(backend_settings(jobs=None), progress=lambda _msg: None)
    monkeypatch.setattr("pytest_tileconform.flashinfer.unitbuild.available_cores", lambda: 16)
    # planned for the build cache's capacity (BuildCache.capacity): this host's cores and memory
    monkeypatch.setattr("pytest_tileconform.compile.cache.available_cores", lambda: 16)
    monkeypatch.setattr("pytest_tileconform.compile.cache.available_memory", lambda: 134 * GB)
    monkeypatch.setattr(backend, "_spec", lambda group: len(group))
    assert backend._units.plan_units(cases, 36) == [(unit, len(unit)) for unit in units]  # type: ignore[comparison-overlap]
