"""How the FlashInfer backend splits the cases it must compile into shared translation units."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from test_reference import make_case

from pytest_tileconform.buildcache import BuildSpec
from pytest_tileconform.cases import Case
from pytest_tileconform.flashinfer.backend import FlashInferBackend, Settings, plan_groups
from pytest_tileconform.verdict import Stage


@pytest.mark.parametrize(
    ("n", "jobs", "most", "sizes"),
    [
        (0, 4, 8, []),
        (1, 4, 8, [1]),
        (3, 16, 8, [1, 1, 1]),  # fewer cases than cores: one compile per case
        (20, 16, 8, [2, 2, 2, 2] + [1] * 12),
        (128, 16, 8, [8] * 16),  # one full round
        (129, 16, 8, [5] * 1 + [4] * 31),  # two rounds rather than a straggler of 1
        (270, 32, 8, [5] * 14 + [4] * 50),
        (10, 1, 8, [5, 5]),  # one core: two rounds of even units
        (10, 4, 1, [1] * 10),  # grouping off
    ],
)
def test_plan_groups(n: int, jobs: int, most: int, sizes: list[int]) -> None:
    items = list(range(n))
    groups = plan_groups(items, jobs, most)
    assert [len(g) for g in groups] == sizes
    assert [i for g in groups for i in g] == items  # contiguous, nothing lost or repeated
    assert all(len(g) <= most for g in groups)


# A stand-in for nvcc: the "unit" lists its cases one per line; a case named in FAIL_ON fails to
# compile, and so does every unit that holds it.
FAKE_COMPILER = """
import pathlib, sys
src, out = map(pathlib.Path, sys.argv[1:3])
text = src.read_text()
if "128x256x64" in text:
    print("tu.cu(3): error: static assertion failed with \\"tile too big\\"")
    sys.exit(1)
out.write_text(text)
"""


def test_a_unit_that_fails_to_compile_is_rebuilt_case_by_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = tmp_path / "fake_nvcc.py"
    compiler.write_text(FAKE_COMPILER)
    settings = Settings(
        device="compile",
        cache_dir=tmp_path / "cache",
        sources=None,
        jobs=1,
        group=8,
        timeout=10.0,
        seed=0,
        timing_iters=0,
        keep_runs=False,
        worker_count=1,
        worker_index=0,
    )
    backend = FlashInferBackend(settings, progress=lambda _msg: None)

    def spec(cases: Sequence[Case]) -> BuildSpec:
        return BuildSpec(
            source="".join(f"{c.id}\n" for c in cases),
            command=(sys.executable, str(compiler), "{src}", "{out}"),
            salt="fake",
            ram_bytes=1,
            label=cases[0].id,
        )

    monkeypatch.setattr(backend, "_spec", spec)
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
