"""How the FlashInfer backend splits the cases it must compile into shared translation units."""

from __future__ import annotations

import pytest

from pytest_tileconform.flashinfer.backend import plan_groups


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
