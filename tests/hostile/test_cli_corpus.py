"""The seeded, time-boxed fuzz tests of the results and tactics readers (the corpus's shared pieces
are helpers/cli_corpus.py)."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from helpers.cli_corpus import VALID_TACTICS, tileconform, valid_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_tileconform.flashinfer.tactics.offered import ProbeError, parse
from pytest_tileconform.results.store import ReportError, parse_results, read_results

# -- fuzz: the results and tactics readers answer a document or their one error, nothing else
# Seeded (derandomize) and bounded (max_examples): the same inputs, about 15 s, every run.

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)
_FIELDS = st.sampled_from(
    [
        "format",
        "cases",
        "host",
        "created",
        "id",
        "case",
        "verdict",
        "outcome",
        "tile",
        "smem_requested",
        "extra",
    ]
)
_FUZZ = settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _mutate(document: Any, path: list[int], value: Any) -> Any:
    """``document`` with the node that ``path`` picks (indices into its keys/items) replaced."""
    node: Any = document
    parent: Any = None
    key: Any = None
    for step in path:
        if isinstance(node, dict) and node:
            parent, key = node, list(node)[step % len(node)]
        elif isinstance(node, list) and node:
            parent, key = node, step % len(node)
        else:
            break
        node = parent[key]
    if parent is None:
        return value
    parent[key] = value
    return document


@_FUZZ
@given(path=st.lists(st.integers(0, 50), max_size=6), value=_JSON)
def test_fuzz_results_documents(path: list[int], value: Any) -> None:
    """A valid document with one node replaced by arbitrary JSON: valid or ReportError."""
    with contextlib.suppress(ReportError):
        parse_results(_mutate(valid_document(), path, value), "fuzz.json")


@_FUZZ
@given(data=st.dictionaries(_FIELDS, _JSON, max_size=5))
def test_fuzz_results_shapes(data: dict[str, Any]) -> None:
    with contextlib.suppress(ReportError):
        parse_results({"format": 2, "cases": [data], **data}, "fuzz.json")


@_FUZZ
@given(raw=st.binary(max_size=300), gz=st.booleans())
def test_fuzz_results_bytes(tmp_path_factory: Any, raw: bytes, gz: bool) -> None:
    """Arbitrary bytes as a results file (and as a .gz one): a document or ReportError."""
    path = tmp_path_factory.mktemp("fuzz") / ("r.json.gz" if gz else "r.json")
    path.write_bytes(raw)
    with contextlib.suppress(ReportError):
        read_results(path)


_TACTIC_LINE = json.loads(VALID_TACTICS.read_text().splitlines()[0])


@_FUZZ
@given(path=st.lists(st.integers(0, 50), max_size=4), value=_JSON)
def test_fuzz_tactics_lines(path: list[int], value: Any) -> None:
    """A valid probe line with one node replaced by arbitrary JSON: tactics or ProbeError."""
    line = json.dumps(_mutate(copy.deepcopy(_TACTIC_LINE), path, value))
    with contextlib.suppress(ProbeError):
        parse([line])


@_FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_tactics_text(text: str) -> None:
    with contextlib.suppress(ProbeError):
        parse(text.splitlines())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--timeout", "0"], "--timeout: 0: must be a finite number of seconds above 0"),
        (["--timeout", "nan"], "--timeout: nan: must be a finite"),
        (["--timeout", "inf"], "--timeout: inf: must be a finite"),
        (["--timeout=-1"], "--timeout: -1: must be a finite"),
        (["--build-jobs", "0"], "--build-jobs: 0: must be at least 1"),
        (["--build-jobs", "3000000000"], "--build-jobs: 3000000000: must be at most"),
        (["--timeout", "0.001"], "--timeout: 0.001: must be at least 1 second"),
        (["--build-group=-1"], "--build-group: -1: must be at least 1"),
        (["--json", "/"], "--json /: is a folder"),
    ],
    ids=[
        "timeout-0",
        "timeout-nan",
        "timeout-inf",
        "timeout-negative",
        "jobs-0",
        "jobs-3e9",
        "timeout-below-a-second",
        "group-neg",
        "json-dir",
    ],
)
def test_bisect_options(args: list[str], fragment: str) -> None:
    proc = tileconform("bisect", "--arch", "sm120", "--dtype", "bf16", "--tile", "128x128x64", *args)
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr
