"""How the FlashInfer backend splits the cases it must compile into shared translation units."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.cases import make_case

from pytest_tileconform.compile.cache import BuildResult, BuildSpec
from pytest_tileconform.compile.failure import Cause, Failure
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.planner import (
    DEFAULT_GROUP,
    UNIT_COST,
    compile_ram,
    plan_groups,
    unit_size,
)
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.verdict import NotJudgeable, Stage, UnusableEnvironment


@pytest.mark.parametrize(
    ("n", "most", "sizes"),
    [
        (0, 8, []),
        (1, 8, [1]),
        (3, 1, [1, 1, 1]),  # grouping off, or few cases on many cores: one compile per case
        (3, 8, [3]),
        (128, 8, [8] * 16),
        (129, 8, [8] * 10 + [7] * 7),  # as few units as the bound allows, as even as possible
        (10, 8, [5, 5]),
    ],
)
def test_plan_groups(n: int, most: int, sizes: list[int]) -> None:
    items = list(range(n))
    groups = plan_groups(items, most)
    assert [len(g) for g in groups] == sizes
    assert [i for g in groups for i in g] == items  # contiguous, nothing lost or repeated


@pytest.mark.parametrize(
    ("families", "most", "sizes"),
    [
        ([72] * 5, 18, [18] * 20),  # the sm90 matrix as its cold build on a 16-core H200 host ran
        ([7, 7, 6], 8, [7, 7, 6]),  # a unit per family, none spanning two
        ([10, 2], 8, [5, 5, 2]),  # a family needs 2 units of at most 8; the small one its own
        ([3], 1, [1, 1, 1]),
    ],
)
def test_plan_groups_keeps_families_apart(families: list[int], most: int, sizes: list[int]) -> None:
    items = [(f, i) for f, count in enumerate(families) for i in range(count)]
    groups = plan_groups(items, most, family=lambda item: item[0])
    assert [len(g) for g in groups] == sizes
    assert [i for g in groups for i in g] == items
    assert all(len({f for f, _ in g}) == 1 for g in groups)


def test_plan_groups_gathers_interleaved_families() -> None:
    """The sm90 matrix's fp8 suite alternates its two output types every 4 cases (each tile and
    cluster, both); taken in matrix order they made units of 4 where 8 were planned."""
    items = [(out, i) for i in range(0, 72, 4) for out in ("bf16", "fp16") for i in range(i, i + 4)]
    groups = plan_groups(items, 8, family=lambda item: item[0])
    assert [len(g) for g in groups] == [8] * 18
    assert all(len({out for out, _ in g}) == 1 for g in groups)
    assert sorted(i for g in groups for i in g) == sorted(items)
    assert [i for _, i in groups[0]] == list(range(8))  # in their order within the family


# A stand-in for nvcc: the "unit" lists its cases one per line; a case named in FAIL_ON fails to
# compile, and so does every unit that holds it, with an error located in the kernel's sources
# (CUTLASS's headers, under the folder the spec names as FlashInfer's), as a real verdict is.
FAKE_COMPILER = """
import pathlib, sys
src, out = map(pathlib.Path, sys.argv[1:3])
text = src.read_text()
if len(sys.argv) > 4:  # a log of the unit sizes compiled (the last argument: the sources)
    with open(sys.argv[3], "a") as log:
        log.write(f"{len(text.splitlines())} ")
if "128x256x64" in text:
    header = sys.argv[-1] + "/cutlass/include/cute/arch/mma_sm90.hpp"
    print(f"{header}(3): error: static assertion failed with \\"tile too big\\"")
    sys.exit(1)
out.write_text(text)
"""


def fake_spec(compiler: Path, log: Path | None = None) -> Callable[[Sequence[MoeCase]], BuildSpec]:
    """The backend's ``_spec`` for the stand-in compiler: a unit lists its cases' ids."""
    extra = () if log is None else (str(log),)

    def spec(cases: Sequence[MoeCase]) -> BuildSpec:
        return BuildSpec(
            source="".join(f"{c.id}\n" for c in cases),
            command=(sys.executable, str(compiler), "{src}", "{out}", *extra, "{flashinfer}"),
            salt="fake",
            ram_bytes=1,
            label=cases[0].id,
            roots=(("flashinfer", str(compiler.parent)),),
            sources=("flashinfer",),
        )

    return spec


def test_a_unit_that_fails_to_compile_is_rebuilt_case_by_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    compiler = tmp_path / "fake_nvcc.py"
    compiler.write_text(FAKE_COMPILER)
    settings = backend_settings(group=8)
    backend = FlashInferBackend(settings, progress=lambda _msg: None)

    monkeypatch.setattr(backend, "_spec", fake_spec(compiler))
    monkeypatch.setattr(backend, "_limitations", lambda cases, jobs=1, deadline=None: {})  # no nvcc probe
    tiles = [(128, 64, 64), (128, 128, 64), (128, 256, 64), (256, 128, 64), (128, 32, 64)]
    cases = [replace(make_case(), tile=tile) for tile in tiles]
    backend.prepare(cases[:2])  # cached before: found by their own keys later
    backend.prepare(cases)
    verdicts = {case.tile: backend.judge(case) for case in cases}
    bad = verdicts.pop((128, 256, 64))
    assert bad.failed_stage is Stage.COMPILE and "tile too big" in bad.detail
    assert all(v.failed_stage is None and v.judged_through is Stage.COMPILE for v in verdicts.values())
    units = {case.tile: backend._builds[case] for case in cases}
    # the two cached cases share their first unit; the other three failed together, then the
    # two good ones were built one by one
    assert units[(128, 64, 64)].path == units[(128, 128, 64)].path  # type: ignore[union-attr]
    assert units[(256, 128, 64)].path != units[(128, 32, 64)].path  # type: ignore[union-attr]


def test_a_failed_unit_is_planned_again_in_halves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """One bad case among 8: units of 8, then 4, then 2, then the last pair alone; the good
    cases get their verdicts from the smaller units that compiled."""
    compiler = tmp_path / "fake_nvcc.py"
    log = tmp_path / "units.log"
    compiler.write_text(FAKE_COMPILER)
    said: list[str] = []
    backend = FlashInferBackend(backend_settings(group=8), progress=said.append)

    monkeypatch.setattr(backend, "_spec", fake_spec(compiler, log))
    monkeypatch.setattr(backend, "_limitations", lambda cases, jobs=1, deadline=None: {})  # no nvcc probe
    good = [(128, 16, 64), (128, 32, 64), (128, 64, 64), (128, 128, 64)]
    variants = [(tile, swap) for tile in good for swap in (False, True)][:7]
    variants.insert(5, ((128, 256, 64), False))  # the bad one, in the second half
    cases = [
        replace(c := make_case(), tile=tile, axes=replace(c.axes, swap_ab=swap)) for tile, swap in variants
    ]
    monkeypatch.setattr("pytest_tileconform.flashinfer.unitbuild.available_cores", lambda: 1)
    backend.prepare(cases)
    verdicts = [backend.judge(case) for case in cases]
    assert [v.failed_stage is Stage.COMPILE for v in verdicts] == [c.tile == (128, 256, 64) for c in cases]
    assert sorted(int(n) for n in log.read_text().split()) == [1, 1, 2, 2, 4, 4, 8]
    units = [backend._builds[case].path for case in cases]  # type: ignore[union-attr]
    assert units[0] == units[1] == units[2] == units[3]  # the good half of 8
    assert units[6] == units[7]  # the good pair of the bad half
    # each round of replanning is said, so the user knows why good cases compile again
    assert [line for line in said if "failed" in line] == [
        "1 translation unit(s) of 8 case(s) failed to compile: planned again as 2 unit(s) of at most 4 "
        "to find the case(s) at fault; their cases that compile are compiled again",
        "1 translation unit(s) of 4 case(s) failed to compile: planned again as 2 unit(s) of at most 2 "
        "to find the case(s) at fault; their cases that compile are compiled again",
        "2 case(s) of failed units of 2 or 3 are compiled one by one: a compile error there is the "
        "case's own verdict",
    ]


GB = 1_000_000_000
SM90 = UNIT_COST[90]


def ram_bound(cores: int, memory: int) -> Callable[[int], int]:
    """Parallel compiles a host allows for a unit of ``size`` (the backend's RAM model for SM90,
    85 % of the memory usable)."""
    return lambda size: min(cores, int(memory * 0.85) // compile_ram(90, size))


@pytest.mark.parametrize(
    ("families", "cores", "memory", "expected"),
    [
        ([16], 2, 20 * GB, (16, 1)),  # a 2-core CI runner: RAM allows one unit at a time, the largest
        ([126], 32, 256 * GB, (6, 26)),  # one round of 21 units of 6 on a 32-core host
        ([72], 16, 128 * GB, (7, 12)),  # a 72-case slice on a 16-core host: one round
        # the whole sm90 matrix (5 dtypes of 72) on a 16-core host with MemAvailable 134 GB: 20
        # units of 18, 10 at a time, two rounds; what its cold build ran (results/speed/h200-2026-11-29-s13)
        ([72] * 5, 16, 134 * GB, (18, 10)),
        ([72] * 5, 16, 128 * GB, (12, 11)),  # a little less RAM: 30 units of 12, three rounds
        ([1], 16, 128 * GB, (1, 10)),  # ties go to the larger unit: 1 case, 1 unit (its harness apart: 10 GB)
        ([8], 16, 128 * GB, (1, 10)),  # few cases, many cores: each case alone, all at once
        ([8], 1, 100 * GB, (8, 1)),  # one core: the biggest units
    ],
)
def test_unit_size_from_cores_and_ram(
    families: list[int], cores: int, memory: int, expected: tuple[int, int]
) -> None:
    jobs_for = ram_bound(cores, memory)
    size = unit_size(families, DEFAULT_GROUP, jobs_for, cores, SM90)
    assert (size, jobs_for(size)) == expected


def test_unit_size_counts_units_per_dtype() -> None:
    """A unit holds one dtype: two dtypes of 5 cases are two units of 5, not one of 10."""
    assert unit_size([10], DEFAULT_GROUP, lambda _size: 1, 1, SM90) == 10
    assert unit_size([5, 5], DEFAULT_GROUP, lambda _size: 1, 1, SM90) == 5
    jobs_for = ram_bound(16, 134 * GB)
    size = unit_size([72] * 5, DEFAULT_GROUP, jobs_for, 16, SM90)
    jobs = jobs_for(size)
    items = [(dtype, i) for i in range(72) for dtype in "abcde"]
    groups = plan_groups(items, size, family=lambda item: item[0])
    assert len(groups) == 2 * jobs and {len(g) for g in groups} == {size}  # two full rounds


def test_unit_size_when_cpu_bound() -> None:
    """With RAM for 64 compiles at once, the cores decide: on 4 cores 64 cases are a few large
    units (a compile keeps 1.6 cores busy); with cores for all, each case alone."""
    assert unit_size([64], DEFAULT_GROUP, lambda _size: 64, 4, SM90) > 8
    assert unit_size([64], DEFAULT_GROUP, lambda _size: 64, 128, SM90) == 1


def test_unit_size_with_jobs_given() -> None:
    # --tile-build-jobs 32 on 126 cases, 32 cores: one round of 21 units of 6 (units of 4, one
    # round of 32, would need 52 cores' worth of CPU)
    assert unit_size([126], 8, lambda _size: 32, 32, SM90) == 6
    assert unit_size([126], 1, lambda _size: 32, 32, SM90) == 1  # --tile-build-group 1


def test_a_killed_build_gives_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """A compile the out-of-memory killer ended is the host's failure (the session stops with
    one line, test_environment_errors.py), never a compile verdict."""
    backend = FlashInferBackend(backend_settings(device="compile", jobs=2), progress=lambda _msg: None)
    killed = BuildResult(False, tmp_path, 1.0, "", environment=Failure(Cause.SIGNAL, "", 9))
    monkeypatch.setattr(backend, "_build", lambda case: killed)
    with pytest.raises(UnusableEnvironment, match=r"\(signal 9, likely out of memory; 2 ran at a time"):
        backend.judge(make_case())


@pytest.mark.parametrize(
    ("sm", "instantiations", "measured_gb"),
    [
        (90, 8, 7.7),  # SM90 units, cicc + cudafe++ (results/speed/h200-2026-11-29-s13/cs-*.json)
        (90, 16, 10.5),
        (90, 36, 12.9),
        (120, 1, 5.97),  # SM120 NVFP4 units, cicc (results/speed/cpu-2026-11-30-sm120-nvfp4-units.json)
        (120, 8, 9.96),
    ],
)
def test_the_ram_model_covers_every_measured_peak(sm: int, instantiations: int, measured_gb: float) -> None:
    assert compile_ram(sm, instantiations) >= measured_gb * GB


def test_the_cases_of_one_configuration_are_planned_as_one_instantiation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """A matrix judges each configuration over several problems and both PDL settings: those
    cases are one instantiation, so units are planned (and sized) as for the configurations
    alone, each compiled once."""
    compiler = tmp_path / "fake_nvcc.py"
    compiler.write_text(FAKE_COMPILER)
    tiles = [(128, 64, 64), (128, 128, 64), (256, 128, 64), (128, 32, 64)]

    def unit_sizes(cases: list[MoeCase], name: str) -> list[str]:
        log = tmp_path / f"{name}.log"
        settings = backend_settings(group=4, cache_dir=tmp_path / name)
        backend = FlashInferBackend(settings, progress=lambda _msg: None)
        make = fake_spec(compiler, log)
        # the stand-in unit lists its configurations, as codegen instantiates each once
        monkeypatch.setattr(
            backend,
            "_spec",
            lambda group: make(
                [replace(c, axes=replace(c.axes, pdl=None)) for c in {c.tile: c for c in group}.values()]
            ),
        )
        monkeypatch.setattr(backend, "_limitations", lambda cases, jobs=1, deadline=None: {})  # no nvcc probe
        backend.prepare(cases)
        return sorted(log.read_text().split())

    alone = unit_sizes([replace(make_case(), tile=t) for t in tiles], "alone")
    each_twice = unit_sizes(
        [
            replace(c := make_case(), tile=t, axes=replace(c.axes, pdl=p))
            for t in tiles
            for p in (True, False)
        ],
        "pdl",
    )
    assert each_twice == alone and sum(map(int, alone)) == len(tiles)


@pytest.mark.parametrize(
    ("case", "paired"),
    [
        (make_case(), "finalize"),  # GEMM 1 of FlashInfer's fc1 -> fc2: its GEMM 2 joins it
        (replace(c := make_case(fusion="finalize"), axes=replace(c.axes, swap_ab=True)), "none"),
        (replace(make_case("fp32"), tile=(128, 64, 32)), "finalize"),
    ],
)
def test_with_the_sequence_stage_a_unit_holds_the_other_gemm_of_the_pair(
    backend_settings: Callable[..., Settings], case: MoeCase, paired: str
) -> None:
    """``--tile-sequence``: the case's unit also instantiates its tile with the other fusion,
    and names the two each other's SequencePartner (harness_sequence.h); without it, one."""
    alone = FlashInferBackend(backend_settings(), progress=lambda _msg: None)._spec([case]).source
    source = FlashInferBackend(backend_settings(sequence=10), progress=lambda _msg: None)._spec([case]).source
    assert "const int tileconform::kCaseCount = 1;" in alone and "SequencePartner<cases::" not in alone
    assert "const int tileconform::kCaseCount = 2;" in source
    assert f"_{paired}" in source.split("struct Case1 {  // ")[1].splitlines()[0]
    assert "template <> struct SequencePartner<cases::Case0> { using type = cases::Case1; };" in source
    assert "template <> struct SequencePartner<cases::Case1> { using type = cases::Case0; };" in source


@pytest.mark.parametrize(
    ("most", "sizes"),
    [
        (18, [18] * 4),  # the sm90 matrix's units of 18 on the H200: nine pairs each
        (15, [12] * 6),  # an odd bound: pairs fill 14, so six even units rather than 5 and a stray pair
        (3, [2] * 36),
        (1, [2] * 36),  # one per unit asked for: a pair still shares one
    ],
)
def test_plan_groups_never_splits_a_pair(most: int, sizes: list[int]) -> None:
    """A tile's two GEMMs (``together``: the same key) land in one group, gathered where the
    first stands even when the matrix lists every GEMM 1 before every GEMM 2."""
    items = [(fusion, tile) for fusion in ("none", "finalize") for tile in range(36)]
    groups = plan_groups(items, most, together=lambda item: item[1])
    assert [len(g) for g in groups] == sizes
    assert all({t for f, t in g if f == "none"} == {t for f, t in g if f == "finalize"} for g in groups)
    assert sorted(i for g in groups for i in g) == sorted(items)
    assert plan_groups(items, most) != groups  # without the key pairs are split


def pair_cases() -> list[MoeCase]:
    """Three tiles, each with fusion none and finalize (FlashInfer's fc1 -> fc2 pair), and PDL on
    and off: 12 cases of 6 instantiations, in matrix order."""
    return [
        replace(c := make_case(fusion=fusion), tile=tile, axes=replace(c.axes, pdl=pdl))
        for tile in [(128, 64, 64), (128, 128, 64), (128, 32, 64)]
        for fusion in ("none", "finalize")
        for pdl in (True, False)
    ]


def test_the_sequence_stage_plans_the_units_a_run_without_it_plans(
    backend_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tile's fc1 -> fc2 pair shares one unit in both modes, so ``--tile-sequence`` (whose
    units hold each configuration's partner) generates the very units, keys and all, that a run
    without it does: a cache either fills serves the other. Units of at most 3: an odd bound
    would split a pair."""
    monkeypatch.setattr("pytest_tileconform.compile.cache.available_cores", lambda: 16)
    monkeypatch.setattr("pytest_tileconform.compile.cache.available_memory", lambda: 128 * GB)
    cases = list({kernel_config(c): c for c in pair_cases()}.values())
    planned = {}
    for sequence in (0, 10):
        backend = FlashInferBackend(
            backend_settings(sequence=sequence, jobs=None), progress=lambda _msg: None
        )
        planned[sequence] = [(len(group), spec.key) for group, spec in backend._units.plan_units(cases, 3)]
    assert [size for size, _ in planned[0]] == [2, 2, 2]
    assert planned[0] == planned[10]


def test_a_unit_built_in_one_mode_serves_the_other(
    backend_settings: Callable[..., Settings],
) -> None:
    """Each case's entry is linked under both modes' keys where its unit holds what each needs:
    its own instantiation, and for the sequence stage its partner's too."""
    none, finalize, other_tile = (pair_cases()[i] for i in (0, 2, 4))
    plain = FlashInferBackend(backend_settings(), progress=lambda _msg: None)
    paired = FlashInferBackend(backend_settings(sequence=10), progress=lambda _msg: None)
    assert paired._other_mode(none, [none]) == plain._spec([none])  # a sequence unit holds it
    assert plain._other_mode(none, [none, finalize]) == paired._spec([none])
    assert plain._other_mode(finalize, [none, finalize]) == paired._spec([finalize])
    assert plain._other_mode(none, [none, other_tile]) is None  # no partner there: not for the sequence
    fp32 = replace(make_case("fp32"), tile=(128, 64, 32))
    assert paired._spec([fp32]) != plain._spec([fp32])
    mixed = make_case("fp8_e4m3", weight="int4", out="bf16")
    assert plain._other_mode(mixed, [mixed]) is None  # no partner at all: one entry serves both


def test_a_first_verdicts_compile_runs_beside_the_probe_whose_answer_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """One instantiation to build: the probe (the harness's front end) runs while it compiles,
    not before. Where the probe says the tool cannot build the family, that is the case's
    verdict, also in a later run that finds the compile's failure cached."""
    compiler = tmp_path / "fake_nvcc.py"
    compiler.write_text(FAKE_COMPILER)
    backend = FlashInferBackend(backend_settings(), progress=lambda _msg: None)
    monkeypatch.setattr(backend, "_spec", fake_spec(compiler))
    bad = replace(make_case(), tile=(128, 256, 64))
    limitation = NotJudgeable("the tool cannot build this family against FlashInfer 9.9.9")
    probed: list[tuple[list[MoeCase], bool]] = []

    def probe(
        cases: Sequence[MoeCase], jobs: int = 1, deadline: float | None = None
    ) -> dict[MoeCase, NotJudgeable]:
        # the unit's source in its private build folder (compiling) or in its cache entry
        # (compiled: the stand-in compiler can finish between two looks); the time is a bound,
        # not a wait: a loaded 2-core machine has taken over 10 s to check the toolchain first
        end = time.monotonic() + 120
        while not (started := any(tmp_path.glob("cache/*/*/tu.cu"))) and time.monotonic() < end:
            time.sleep(0.05)
        probed.append((list(cases), started))  # the compile did not wait for the probe
        return {case: limitation for case in cases}

    monkeypatch.setattr(backend, "_limitations", probe)
    backend.prepare([bad])
    assert probed == [([bad], True)]
    assert backend._builds[bad] is limitation  # not the compile error the unit cached
    again = FlashInferBackend(backend_settings(), progress=lambda _msg: None)
    monkeypatch.setattr(again, "_spec", fake_spec(compiler))
    monkeypatch.setattr(
        again, "_limitations", lambda cases, jobs=1, deadline=None: {c: limitation for c in cases}
    )
    again.prepare([bad])
    assert again._builds[bad] is limitation
