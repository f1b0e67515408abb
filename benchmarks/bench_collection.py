"""Collection benchmarks: how long a big tile matrix takes to load, expand and collect.

Run with::

    /work/venv/bin/pytest benchmarks/bench_collection.py --benchmark-only

Not part of the default run (``testpaths = ["tests"]``, and the file name does not match
``test_*.py``). The matrix is 1 arch x 5 dtypes x 25 tiles x 4 clusters x 2 swap_ab x
N/1000 named problems, so N is 1,000, 10,000 or 100,000 cases. Set
``TILECONFORM_BENCH_MAX`` to skip sizes above it (e.g. ``10000``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_tileconform.matrix.load import load_matrix

CONFTEST = """
from pytest_tileconform import Verdict, Stage


class NullBackend:
    name = "fake"

    def prepare(self, cases):
        pass

    def judge(self, case):
        return Verdict(failed_stage=None, judged_through=Stage.NUMERICS, source="null")


def pytest_tileconform_register_backends(config):
    return [NullBackend()]
"""

DTYPES = [
    "bf16",
    "fp16",
    "{act: fp8, weight: fp8, out: bf16}",
    "{act: mxfp8, weight: mxfp4, out: bf16}",
    "{act: nvfp4, weight: nvfp4, out: fp16}",
]
TILES = [
    f"{m}x{n}x{k}"
    for m in (64, 128, 256, 512, 1024)
    for n, k in ((64, 64), (128, 64), (256, 64), (128, 128), (256, 128))
]
CLUSTERS = ["1x1x1", "2x1x1", "1x2x1", "2x2x1"]
SIZES = [1_000, 10_000, 100_000]
MAX_SIZE = int(os.environ.get("TILECONFORM_BENCH_MAX", "100000"))


def matrix_text(cases: int) -> str:
    assert len(TILES) == 25 and cases % 1000 == 0
    problems = "".join(
        f"      - {{name: p{i}, experts: 8, rows: {17 * i}, n: 4096, k: 7168}}\n"
        for i in range(cases // 1000)
    )
    return (
        "version: 1\n"
        "backend: fake\n"
        "suites:\n"
        "  - arch: sm90\n"
        f"    dtype: [{', '.join(DTYPES)}]\n"
        f"    tile: [{', '.join(TILES)}]\n"
        f"    cluster: [{', '.join(CLUSTERS)}]\n"
        "    swap_ab: [false, true]\n"
        "    fusion: none\n"
        "    problems:\n" + problems
    )


def sizes() -> list[object]:
    return [
        pytest.param(
            n,
            id=f"{n // 1000}k",
            marks=[] if n <= MAX_SIZE else [pytest.mark.skip(reason=f"TILECONFORM_BENCH_MAX={MAX_SIZE}")],
        )
        for n in SIZES
    ]


def rounds(cases: int) -> int:
    return 5 if cases <= 10_000 else 2


@pytest.mark.parametrize("cases", sizes())
def test_load_and_expand(benchmark, tmp_path: Path, cases: int) -> None:  # type: ignore[no-untyped-def]
    """YAML parse + pydantic validation + cartesian expansion + duplicate check."""
    path = tmp_path / "m.yaml"
    path.write_text(matrix_text(cases))
    loaded = benchmark.pedantic(load_matrix, args=(path, ["fake"]), rounds=rounds(cases), iterations=1)
    assert len(loaded.cases) == cases


@pytest.mark.parametrize("cases", sizes())
def test_collect_only(benchmark, pytester: pytest.Pytester, cases: int) -> None:  # type: ignore[no-untyped-def]
    """``pytest --collect-only -q --tile-matrix m.yaml`` in-process, items made and listed."""
    pytester.makeconftest(CONFTEST)
    (pytester.path / "m.yaml").write_text(matrix_text(cases))

    def collect() -> pytest.RunResult:
        return pytester.runpytest_inprocess(
            "--collect-only", "-q", "-p", "no:cacheprovider", "--tile-matrix", "m.yaml"
        )

    result = benchmark.pedantic(collect, rounds=rounds(cases), iterations=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"{cases} tests collected in *"])
