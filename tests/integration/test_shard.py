"""--tile-shard I/N: a deterministic split of the matrix cases, stable when cases are added."""

from __future__ import annotations

import pytest
from helpers.fake_backend import TileRun, output

from pytest_tileconform.matrix.shard import Shard, ShardSpecError, shard_of

MATRIX = """\
version: 1
backend: fake
suites:
  - arch: sm90
    dtype: [bf16, fp16]
    tile: [128x16x64, 128x32x64, 128x64x64, 128x128x64, 128x256x64, 256x128x64]
    cluster: [1x1x1, 2x1x1]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""

BIGGER = MATRIX.replace("dtype: [bf16, fp16]", "dtype: [bf16, fp16, fp32]")


def _ids(nodeids: list[str]) -> set[str]:
    return {n.rpartition("::")[2] for n in nodeids}


def test_shards_partition_the_matrix(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    everything = _ids(tc.collect())
    assert len(everything) == 24
    shards = [_ids(tc.collect("--tile-shard", f"{i}/3")) for i in (1, 2, 3)]
    assert set().union(*shards) == everything
    assert sum(len(s) for s in shards) == len(everything)  # disjoint
    assert all(shards), "24 cases over 3 shards: none should be empty with this hash"
    for i, shard in enumerate(shards, start=1):
        assert all(shard_of(case_id, 3) == i for case_id in shard)


def test_adding_cases_moves_no_existing_case(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    before = {i: _ids(tc.collect("--tile-shard", f"{i}/4")) for i in range(1, 5)}
    tc.matrix(BIGGER)
    after = {i: _ids(tc.collect("--tile-shard", f"{i}/4")) for i in range(1, 5)}
    for i in range(1, 5):
        assert before[i] <= after[i]
    assert sum(len(s) for s in after.values()) == 36


def test_other_shards_are_reported_deselected(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    result = tc.run("--tile-shard", "2/5")
    mine = len(_ids(tc.collect("--tile-shard", "2/5")))
    assert 0 < mine < 24
    result.assert_outcomes(passed=mine, deselected=24 - mine)
    assert "tileconform: shard 2/5" in result.stdout.str()


def test_shard_with_keyword_selection(tc: TileRun) -> None:
    tc.matrix(MATRIX)
    shard = _ids(tc.collect("--tile-shard", "1/2"))
    both = _ids(tc.collect("--tile-shard", "1/2", "-k", "fp16"))
    assert both == {i for i in shard if "fp16" in i}


def test_shard_report_contains_only_its_cases(tc: TileRun) -> None:
    import json

    tc.matrix(MATRIX)
    tc.run("--tile-shard", "3/3", "--tile-report", "r.json").assert_outcomes(
        passed=len(_ids(tc.collect("--tile-shard", "3/3"))),
        deselected=24 - len(_ids(tc.collect("--tile-shard", "3/3"))),
    )
    report = json.loads((tc.path / "r.json").read_text())
    assert {c["id"] for c in report["cases"]} == _ids(tc.collect("--tile-shard", "3/3"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0/3", "I must be between 1 and N=3"),
        ("4/3", "I must be between 1 and N=3"),
        ("1/0", "N must be at least 1"),
        ("two/3", "expected I/N"),
        ("1", "expected I/N"),
    ],
)
def test_bad_shard_is_a_usage_error(tc: TileRun, spec: str, message: str) -> None:
    tc.matrix(MATRIX)
    result = tc.run("--tile-shard", spec)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in output(result)
    assert "Traceback" not in output(result)


def test_parse() -> None:
    assert Shard.parse(" 2 / 7 ") == Shard(2, 7)
    assert str(Shard(2, 7)) == "2/7"
    with pytest.raises(ShardSpecError):
        Shard.parse("-1/3")


def test_hash_is_fixed() -> None:
    """The split must not change between versions: runners of different versions share it."""
    assert [shard_of(f"case-{i}", 4) for i in range(8)] == [4, 3, 4, 4, 4, 1, 2, 3]
    assert shard_of("sm90-bf16-128x128x64-c1x1x1-none", 5) == 1
    assert shard_of("anything", 1) == 1
