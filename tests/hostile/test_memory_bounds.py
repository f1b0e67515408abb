"""Inputs inside the matrix bounds that would take more memory than the machine has: a
model-sized problem on the virtual device (whose device memory is host memory) is not judged
here, with a reason naming the problem and the bound, before any of it is made.

(The other memory bounds are with their kin: a huge --tile-build-jobs or timeout in
test_options_startup.py and test_cli_corpus.py, a huge file in a cache entry in
test_cache_entries.py.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.cases import make_case
from helpers.stand_in_flashinfer import QUIET

from pytest_tileconform.flashinfer.hostmemory import operand_bytes, virtual_need, virtual_refusal
from pytest_tileconform.flashinfer.problem import Problem

# 400,000 rows of k 4,096 (8 experts of 50,000), n 4,096, bf16: 6.8 GB of operands, inside the
# matrix bounds, about 29.6 GB at the peak; a host with 16 GB available
MODEL_SIZED = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x128x64]
    problems: {name: prefill400k, experts: 8, rows: 50000, n: 4096, k: 4096}
"""
# a plugin: this host has 16 GB available, and making the problem's inputs fails the case
SIXTEEN_GB = """
import pytest
from pytest_tileconform.flashinfer import hostmemory
from pytest_tileconform.flashinfer.numerics.prepared import WorkerInputs

_patch = pytest.MonkeyPatch()


def _made(self, *args, **kwargs):
    raise AssertionError("the problem's inputs were made")


def pytest_configure(config):
    _patch.setattr(hostmemory, "available_memory", lambda: 16 * 10**9)
    _patch.setattr(WorkerInputs, "get", _made)
    _patch.setattr(WorkerInputs, "full", _made)


def pytest_unconfigure(config):
    _patch.undo()
"""


def test_a_model_sized_problem_is_not_judged_on_a_small_host(
    host: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STAND_IN_HOST", "1")
    (host.path / "m.yaml").write_text(MODEL_SIZED)
    host.makepyfile(sixteen_gb=SIXTEEN_GB)
    host.syspathinsert()
    args = ("--tile-matrix", "m.yaml", "--tile-device", "virtual", "-p", "sixteen_gb", "-rs")
    result = host.runpytest(*args, *QUIET)
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, text + result.stderr.str()
    result.assert_outcomes(skipped=1)
    assert (
        "the problem 'prefill400k' (400,000 rows over 8 experts, n 4,096, k 4,096) needs about 29.6 GB"
        in text
    )
    assert "more than the 16.0 GB this host has available" in text
    assert "inputs were made" not in text


def test_the_estimate_and_a_problem_that_fits() -> None:
    small = make_case()
    big = replace(small, axes=replace(small.axes, problem=Problem(rows=(50_000,) * 8, n=4096, k=4096)))
    assert operand_bytes(big) == (400_000 * 4096 * 2, 8 * 4096 * 4096 * 2, 400_000 * 4096 * 2)
    assert virtual_need(big) == 9 * (400_000 * 4096 + 8 * 4096 * 4096) + 2 * 6_822_035_456
    fp8 = replace(big, act="fp8_e4m3", weight="fp8_e4m3")  # inputs drawn alike, stored in half
    assert virtual_need(big) - virtual_need(fp8) == 2 * (400_000 * 4096 + 8 * 4096 * 4096)
    assert virtual_refusal(big, available=virtual_need(big)) is None
    assert virtual_refusal(big, available=virtual_need(big) - 1) is not None
    assert virtual_refusal(small, available=1 << 30) is None


def test_a_build_group_of_billions_plans_at_once(
    host: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--tile-build-group 3000000000 means units as large as the cases allow: the plan looked
    at every size up to it, a loop of billions before anything compiled."""
    monkeypatch.setenv("STAND_IN_HOST", "1")
    args = ("--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-build-group", "3000000000")
    result = host.runpytest(*args, *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert result.parseoutcomes() == {"unrun": 3}
    assert (host.path / "cache" / "compiles.log").read_text().split() == ["3"]  # one unit of all 3
