"""InputCache: the cases of one problem share their inputs and expected D, within a bound;
WorkerInputs makes a hardware case's ready beside the compile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers.cases import make_case

from pytest_tileconform.flashinfer.hardware import hand_over
from pytest_tileconform.flashinfer.numerics.prepared import InputCache, WorkerInputs
from pytest_tileconform.flashinfer.numerics.shared_operands import OPERANDS_FILE, SharingError
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.flashinfer.settings import Settings


def test_cases_of_one_problem_share_inputs_and_expected() -> None:
    cache = InputCache(max_bytes=1 << 30)
    one = make_case("bf16", rows=[3, 0, 5], n=16, k=32, fusion="finalize")
    other_tile = replace(one, tile=(64, 128, 64), axes=replace(one.axes, swap_ab=True))
    first = cache.get(one, 0)
    assert cache.get(other_tile, 0) is first
    expected = first.expected()
    assert first.expected() is expected and cache.get(one, 0).expected() is expected
    # another seed, fusion, output, problem or device is another entry
    for case, seed in [
        (one, 1),
        (replace(one, axes=replace(one.axes, fusion="none")), 0),
        (replace(one, out="fp16"), 0),
        (replace(one, axes=replace(one.axes, problem=Problem(rows=(3, 0, 5), n=16, k=32, bias=True))), 0),
    ]:
        assert cache.get(case, seed) is not first
    assert len(cache) == 5
    assert cache.key(one, 0, torch.device("cpu")) != cache.key(one, 0, torch.device("meta"))


def test_the_cache_keeps_within_its_bytes() -> None:
    big = make_case("fp32", rows=[64, 64], n=64, k=64)
    entry = InputCache(max_bytes=1 << 30).get(big, 0)
    entry.expected()
    cache = InputCache(max_bytes=entry.nbytes * 2 + 1)
    kept = [cache.get(big, seed) for seed in range(4)]
    for p in kept:
        p.expected()
    cache.get(big, 4)  # the least recently used go until the rest fit
    assert len(cache) == 2
    assert cache.get(big, 3) is kept[3]
    tiny = InputCache(max_bytes=1)
    assert tiny.get(big, 0) is tiny.get(big, 0)  # the newest stays, whatever its size
    tiny.get(big, 1)
    assert len(tiny) == 1


def test_inputs_off_the_gpu_reach_the_harness_as_files(
    tmp_path: Path, backend_settings: Callable[..., Settings]
) -> None:
    """Device memory is shared only from a CUDA device: a hardware case whose inputs are on the
    CPU (a torch without CUDA on a GPU host) gets problem.txt and the operand files, and its
    verdict says so."""
    prepared = InputCache(1 << 30).get(make_case(), 0)
    with pytest.raises(SharingError, match="not in device memory"):
        prepared.shared()
    settings = backend_settings(device="hardware")
    shared, how = hand_over(prepared, tmp_path, {"enable_pdl": 1}, settings)
    assert (shared, how) == (None, "files")
    assert {"problem.txt", "a.bin", "b.bin"} <= {p.name for p in tmp_path.iterdir()}
    assert not (tmp_path / OPERANDS_FILE).exists()
    assert "enable_pdl 1" in (tmp_path / "problem.txt").read_text()


def test_inputs_made_ready_are_the_ones_judging_uses() -> None:
    inputs = WorkerInputs(seed=3)
    case = make_case("bf16", rows=[3, 0, 5], n=16, k=32)
    inputs.make_ready(case)
    device = WorkerInputs.hardware_device()  # a CPU build of torch here: "cpu"
    exact, full = inputs.get(case, device), inputs.full(case, device)
    assert not isinstance(full, str)
    assert exact is not full and exact.inputs.device.type == device
    for prepared in (exact, full):  # the reference was made with them, and kept
        assert prepared._expected and prepared.expected() is prepared._expected[0]
    assert inputs.get(case, device) is exact  # made once


def test_what_cannot_be_made_ready_is_left_to_judging(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = WorkerInputs(seed=0)
    case = make_case("bf16", rows=[3], n=16, k=32)

    def refuse(*args: object) -> None:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr("pytest_tileconform.flashinfer.numerics.prepared.make_family_inputs", refuse)
    inputs.make_ready(case)  # no error here
    with pytest.raises(RuntimeError, match="out of memory"):  # judging the case says it
        inputs.get(case, WorkerInputs.hardware_device())
