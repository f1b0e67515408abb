"""InputCache: the cases of one problem share their inputs and expected D, within a bound."""

from __future__ import annotations

from dataclasses import replace

import torch
from test_reference import make_case

from pytest_tileconform.flashinfer.prepared import InputCache
from pytest_tileconform.matrix.schema import Problem


def test_cases_of_one_problem_share_inputs_and_expected() -> None:
    cache = InputCache(max_bytes=1 << 30)
    one = make_case("bf16", rows=[3, 0, 5], n=16, k=32, fusion="finalize")
    other_tile = replace(one, tile=(64, 128, 64), swap_ab=True)
    first = cache.get(one, 0)
    assert cache.get(other_tile, 0) is first
    expected = first.expected()
    assert first.expected() is expected and cache.get(one, 0).expected() is expected
    # another seed, fusion, output, problem or device is another entry
    for case, seed in [
        (one, 1),
        (replace(one, fusion="none"), 0),
        (replace(one, out="fp16"), 0),
        (replace(one, problem=Problem(rows=(3, 0, 5), n=16, k=32, bias=True)), 0),
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
