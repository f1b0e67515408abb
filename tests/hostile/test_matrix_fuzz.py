"""Fuzzing the matrix loader: valid matrices with bytes flipped, cut short, deleted, repeated or
with YAML constructs inserted either load or are refused with MatrixInvalid whose every error
has a position; no other exception, and never a slow example.

Seeded and bounded for CI (``derandomize``, no example database, a fixed number of examples and
a deadline per example), so a failure here reproduces on every machine.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from helpers.fake_backend import BASIC, TEST_KINDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_tileconform.matrix.bounds import MAX_CASES
from pytest_tileconform.matrix.load import LoadedMatrix, MatrixInvalid, load_matrix

RICH = """\
version: 1
backend: fake
defaults:
  arch: sm90
  problems: &p
    - {name: small, experts: 4, rows: [0, 1, 77, 300], n: 384, k: 512}
    - {name: big, experts: 2, rows: 64, n: 256, k: 128}
suites:
  - name: bf16
    dtype: [bf16, {act: fp8, weight: fp8, out: bf16}]
    tile:
      - 128x64x64
      - {shape: 128x16x64, cluster: [1x1x1, 2x1x1]}
      - shape: [64, 64, 128]
        arch: [sm100, sm120]
        problems: *p
    swap_ab: [false, true]
    fusion: [none, finalize]
expectations:
  sm90-bf16-128x64x64-c1x1x1-none-small: {stage: initialize, status: "Error Internal", smem: 1, limit: 2}
"""

SEEDS = [
    BASIC.encode(),
    RICH.encode(),
    (Path(__file__).parents[2] / "matrices" / "smoke-sm90.yaml").read_bytes(),
]

#: Pieces of YAML (and of not-YAML) that a mutation inserts.
CONSTRUCTS = [
    b"&a ",
    b"*a",
    b"*p",
    b"<<: *p\n",
    b"&b [*b, *b]",
    b"[",
    b"]",
    b"{",
    b"}",
    b": ",
    b"- ",
    b", ",
    b"\n",
    b"\n  ",
    b"\n    - ",
    b"\t",
    b"? ",
    b"---\n",
    b"...\n",
    b"%YAML 1.1\n---\n",
    b"!!binary ",
    b"!!python/object:os.system ",
    b"!!timestamp ",
    b"!!set ",
    b"!local ",
    b"|\n",
    b">-\n",
    b"'",
    b'"',
    b"#",
    b"~",
    b"true",
    b".inf",
    b"-1",
    b"0x",
    b"1e400",
    b"9" * 60,
    b"3000000000",
    b"::",
    b"/",
    b"sm90",
    b"x",
    b"\x00",
    b"\xff",
    b"\xc0\x80",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\x07",
    "é".encode(),
    b"[" * 40,
    b"{a: " * 40,
]

flip = st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(0, 255))
truncate = st.tuples(st.just("truncate"), st.integers(0, 1 << 16), st.just(0))
delete = st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 40))
insert = st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.integers(0, len(CONSTRUCTS) - 1))
repeat = st.tuples(st.just("repeat"), st.integers(0, 1 << 16), st.integers(1, 30))
MUTATIONS = st.lists(st.one_of(flip, truncate, delete, insert, repeat), min_size=1, max_size=6)


def mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    for op, where, arg in ops:
        at = where % (len(data) + 1)
        if op == "flip" and data:
            at = where % len(data)
            data = data[:at] + bytes([arg]) + data[at + 1 :]
        elif op == "truncate":
            data = data[:at]
        elif op == "delete":
            data = data[:at] + data[at + arg :]
        elif op == "insert":
            data = data[:at] + CONSTRUCTS[arg] + data[at:]
        elif op == "repeat":  # a line repeated: duplicate keys, repeated items, long lists
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            line = data[start : len(data) if end < 0 else end + 1]
            data = data[:start] + line * arg + data[start:]
    return data


FOLDER = Path(tempfile.mkdtemp(prefix="tileconform-fuzz-"))


def check(data: bytes, backends: set[str] | None) -> None:
    path = FOLDER / "m.yaml"
    path.write_bytes(data)
    try:
        loaded = load_matrix(path, TEST_KINDS, backends)
    except MatrixInvalid as exc:
        assert exc.errors
        for error in exc.errors:
            assert error.path == path
            assert error.line >= 1 and error.col >= 1, error
            assert error.message.strip(), error
            assert str(error).startswith(f"{path}:{error.line}:{error.col}: ")
        return
    assert isinstance(loaded, LoadedMatrix)
    assert 0 < len(loaded.cases) <= MAX_CASES
    assert len({c.id for c in loaded.cases}) == len(loaded.cases)


FUZZ = settings(
    max_examples=400,
    deadline=timedelta(seconds=5),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(seed=st.sampled_from(range(len(SEEDS))), ops=MUTATIONS)
def test_mutated_matrices_load_or_are_refused_with_positions(
    seed: int, ops: list[tuple[str, int, int]]
) -> None:
    check(mutate(SEEDS[seed], ops), {"fake", "flashinfer-cutlass-moe"})


@FUZZ
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes_are_refused_with_positions(data: bytes) -> None:
    check(data, None)


@FUZZ
@given(
    text=st.text(
        alphabet=st.sampled_from(
            [*list("version: 1backend fake\nsuites-[]{},&*!|>'\"#~ \tsm90x128"), "\u2028", "\x85"]
        ),
        max_size=400,
    )
)
def test_yaml_like_text_is_refused_with_positions(text: str) -> None:
    check(text.encode("utf-8"), {"fake"})


def test_the_seeds_load() -> None:
    for seed in SEEDS:
        check(seed, {"fake", "flashinfer-cutlass-moe"})
    assert len(load_matrix(FOLDER / "m.yaml", TEST_KINDS, text=RICH).cases) > 10
