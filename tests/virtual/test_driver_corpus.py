"""Differential conformance of vcudart against the real driver (pytest_tileconform.virtual.conformance).

The probe is built once per session against vcudart and run on the sm90 profile; its lines must
equal the corpus an H200 recorded, call for call. The other tests hold the probe, the recorder
and the comparison to what they promise, so that agreement cannot be vacuous.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_cuda_home
from pytest_tileconform.virtual.conformance import record
from pytest_tileconform.virtual.conformance.replay import (
    CORPUS,
    NORMALISED,
    CorpusError,
    build_probe,
    compare,
    read_corpus,
    run_probe,
)
from pytest_tileconform.virtual.profiles import builtin

Lines = tuple[dict[str, Any], list[dict[str, Any]]]
PLAN = {"seed": int(record.SEED), "generated": int(record.COUNT)}


@pytest.fixture(scope="session")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        cuda_home = find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs the CUDA toolkit: {exc}")
    return build_probe(tmp_path_factory.mktemp("probe-cache"), cuda_home)


@pytest.fixture(scope="session")
def on_sm90(probe: Path, tmp_path_factory: pytest.TempPathFactory) -> Lines:
    return run_probe(probe, PLAN, tmp_path_factory.mktemp("sm90"), builtin("sm90"))


# -- the corpus ----------------------------------------------------------------------------------

CALL_KINDS = (
    "cudaGetDriverEntryPointByVersion",
    "cuTensorMapEncodeTiled",
    "cuTensorMapEncodeIm2col",
    "cudaFuncSetAttribute",
    "cudaFuncGetAttributes",
    "launch",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveClusters",
)


@pytest.fixture(scope="session")
def driver() -> Lines:
    assert CORPUS.exists(), f"the driver corpus {CORPUS} is missing: record it with lab/gpu-driver-corpus.sh"
    corpus = read_corpus(CORPUS)
    assert {k: corpus[0][k] for k in PLAN} == PLAN, (
        f"{CORPUS.name} was recorded for other calls than record.py's SEED and COUNT make: record it again"
    )
    return corpus


def test_every_corpus_call_is_of_a_judged_kind(driver: Lines) -> None:
    assert {row["call"] for row in driver[1]} == set(CALL_KINDS)
    assert len(driver[1]) == driver[0]["edges"] + driver[0]["generated"] >= 10_000


@pytest.mark.parametrize("call", CALL_KINDS)
def test_vcudart_answers_as_the_driver_did(call: str, driver: Lines, on_sm90: Lines) -> None:
    """Every corpus call of this kind, line for line (header: only NORMALISED fields may differ)."""

    def only(lines: Lines) -> Lines:
        return lines[0], [row for row in lines[1] if row["call"] == call]

    replay = compare(only(driver), only(on_sm90))
    assert replay.agrees, replay.report()


# -- the probe covers every decision --------------------------------------------------------------


def test_the_probe_asks_every_decision(on_sm90: Lines) -> None:
    header, rows = on_sm90
    assert header["generated"] >= 10_000 and len(rows) == header["edges"] + header["generated"]
    assert [row["i"] for row in rows] == list(range(len(rows)))
    calls = Counter(row["call"] for row in rows)
    assert set(calls) == set(CALL_KINDS)
    for encoder in ("cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col"):
        args = [row["args"] for row in rows if row["call"] == encoder]
        assert {a["type"] for a in args} >= set(range(16)), encoder
        assert {a["interleave"] for a in args} >= {0, 1, 2} and {a["swizzle"] for a in args} >= set(range(7))
        assert {a["l2"] for a in args} >= {0, 1, 2, 3} and {a["oob"] for a in args} >= {0, 1}
        assert {a["addr"] for a in args} == {"device", "null", "host", "device_far"}
        assert {(a["interleave"], a["swizzle"]) for a in args} >= {(i, s) for i in range(3) for s in range(7)}
    tiled = [row["args"] for row in rows if row["call"] == "cuTensorMapEncodeTiled"]
    assert {a["rank"] for a in tiled} >= set(range(7))
    assert any(2**32 in a["dims"] for a in tiled) and any(2**32 + 1 in a["dims"] for a in tiled)
    assert any(257 in a["box"] for a in tiled) and any(9 in a["estr"] for a in tiled)
    assert any(2**40 in a["strides"] for a in tiled) and any(a["map_offset"] for a in tiled)
    results = Counter((row["call"], row["result"]) for row in rows)
    for call in ("cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col"):
        assert results[call, "CUDA_SUCCESS"] > 400 and results[call, "CUDA_ERROR_INVALID_VALUE"] > 400
    launches = [row for row in rows if row["call"] == "launch"]
    assert {row["args"]["api"] for row in launches} == {
        "cudaLaunchKernelExC",
        "cudaLaunchKernel",
        "cudaLaunchCooperativeKernel",
    }
    assert any(row["args"].get("cooperative") for row in launches)
    assert {tuple(row["args"]["cluster"]) for row in launches if "cluster" in row["args"]} >= {
        (8, 1, 1),
        (16, 1, 1),
        (32, 1, 1),
    }
    assert {row["result"] for row in launches} >= {
        "cudaSuccess",
        "cudaErrorInvalidValue",
        "cudaErrorInvalidClusterSize",
        "cudaErrorCooperativeLaunchTooLarge",
        "cudaErrorLaunchOutOfResources",
    }
    attrs = {row["args"]["attr"] for row in rows if row["call"] == "cudaFuncSetAttribute"}
    assert attrs >= set(range(8, 16))


# -- the comparison ------------------------------------------------------------------------------


def test_a_wrong_rule_is_reported_with_the_calls_arguments(
    probe: Path, on_sm90: Lines, tmp_path: Path
) -> None:
    """vcudart on a profile whose one cluster limit differs disagrees exactly on the calls that
    limit decides, each named with its arguments: the replay is not vacuous."""
    narrower = dataclasses.replace(builtin("sm90"), max_cluster_size_nonportable=8)
    replay = compare(on_sm90, run_probe(probe, PLAN, tmp_path, narrower))
    assert not replay.agrees and not replay.header
    assert {m.call for m in replay.mismatches} <= {"launch", "cudaOccupancyMaxActiveClusters"}
    launches = [m for m in replay.mismatches if m.call == "launch"]
    assert any(m.args.get("cluster") == [16, 1, 1] for m in launches)
    for m in launches:
        assert m.driver is not None and m.virtual is not None
        assert m.virtual["result"] == "cudaErrorInvalidClusterSize", m
    first = launches[0]
    assert f"#{first.index} launch" in replay.report() and '"kernel": "k_' in replay.report()


def test_the_gpc_layout_decides_the_cluster_answers(probe: Path, on_sm90: Lines, tmp_path: Path) -> None:
    """Without sm90's GPC layout (every SM one pool) vcudart answers more clusters than the driver
    placed: the layout, not a per-call rule, is what makes those calls agree."""
    pooled = dataclasses.replace(builtin("sm90"), gpc_sms=())
    replay = compare(on_sm90, run_probe(probe, PLAN, tmp_path, pooled))
    assert {m.call for m in replay.mismatches} == {"cudaOccupancyMaxActiveClusters", "launch"}
    for m in replay.mismatches:
        assert m.driver is not None and m.virtual is not None
        if m.call == "cudaOccupancyMaxActiveClusters":
            assert m.virtual["clusters"] > m.driver["clusters"], m
        else:
            assert m.args["cooperative"] and m.driver["result"] == "cudaErrorCooperativeLaunchTooLarge", m


def _lines(header: dict[str, Any], *rows: dict[str, Any]) -> Lines:
    return header, list(rows)


def test_only_the_named_header_fields_are_normalised() -> None:
    row = {"i": 0, "call": "x", "args": {"a": 1}, "result": "ok"}
    driver = {"gpu": "NVIDIA H200", "driver_version": 13000, "nvcc": "13.0.88", "sm_count": 132, "seed": 1}
    virtual = {**driver, "gpu": "virtual", "nvcc": "13.1.0", "sm_count": 148}
    replay = compare(_lines(driver, row), _lines(virtual, row))
    assert replay.header == [("sm_count", 132, 148)]
    assert ("gpu", "NVIDIA H200", "virtual") in replay.normalised and not replay.agrees
    assert "normalised gpu: driver 'NVIDIA H200', vcudart 'virtual'" in replay.report()
    assert set(NORMALISED) == {"gpu", "driver_version", "runtime_version", "nvcc"}


def test_missing_extra_and_changed_lines_all_count() -> None:
    header = {"seed": 1}
    a = {"i": 0, "call": "x", "args": {"n": 1}, "result": "ok"}
    b = {"i": 1, "call": "x", "args": {"n": 2}, "result": "ok"}
    changed = {**b, "result": "refused"}
    extra = {"i": 2, "call": "x", "args": {"n": 3}, "result": "ok"}
    replay = compare(_lines(header, a, b), _lines(header, changed, extra))
    assert [(m.index, m.driver, m.virtual) for m in replay.mismatches] == [
        (0, {"result": "ok"}, None),
        (1, {"result": "ok"}, {"result": "refused"}),
        (2, None, {"result": "ok"}),
    ]
    assert compare(_lines(header, a, b), _lines(header, a, b)).agrees


def test_a_damaged_corpus_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "corpus.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"header":{}}\n{"i":0,\n'))
    with pytest.raises(CorpusError, match=r"corpus\.jsonl\.gz:2: not JSON"):
        read_corpus(bad)
    bad.write_bytes(b"not gzip")
    with pytest.raises(CorpusError, match="cannot read the corpus"):
        read_corpus(bad)


# -- the recorder on the GPU host -------------------------------------------------------------------

FAKE_PROBE = """\
import os, sys, time
seed, count, start = sys.argv[1:]
state = sys.argv[0] + ".state"
done = set(open(state).read().split()) if os.path.exists(state) else set()
def once(tag):
    if tag in done:
        return False
    open(state, "a").write(tag + "\\n")
    return True
if start == "0":
    print('{"header":{"edges":2,"generated":%s}}' % count, flush=True)
for i in range(int(start), 2 + int(count)):
    sys.stdout.write('{"i":%d,"call":"c","args":{"n":%d}' % (i, i)); sys.stdout.flush()
    if i == 1 and once("crash"): os.kill(os.getpid(), 11)
    if i == 3 and once("hang"): time.sleep(60)
    print(',"result":"ok"}', flush=True)
    if i == 4 and once("sticky"): sys.exit(75)
"""


def _fake_probe(tmp_path: Path, body: str = FAKE_PROBE) -> Path:
    path = tmp_path / "fake_probe"
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)
    return path


def test_recorder_restarts_after_a_crash_a_hang_and_a_sticky_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(record, "RUN_TIMEOUT", 2.0)
    lines = record.record(_fake_probe(tmp_path), "7", "4")
    header = record.check_complete(lines)
    rows = [json.loads(line) for line in lines[1:]]
    assert header == {"edges": 2, "generated": 4} and [r["i"] for r in rows] == list(range(6))
    assert rows[1] == {"i": 1, "call": "c", "args": {"n": 1}, "crash": "signal SIGSEGV"}
    assert rows[3]["crash"] == "hung, killed after 2 s"
    assert rows[4] == {"i": 4, "call": "c", "args": {"n": 4}, "result": "ok"}  # the sticky call's own line
    out = tmp_path / "corpus.jsonl.gz"
    record.write_corpus(lines, out)
    assert read_corpus(out)[1] == rows and "CRASHED" in record.summary(lines)


def test_recorder_refuses_an_incomplete_corpus(tmp_path: Path) -> None:
    header = 'import sys\nif sys.argv[3] == "0": print(\'{"header":{"edges":2,"generated":1}}\')\n'
    with pytest.raises(record.RecordError, match="before its first call"):
        record.record(_fake_probe(tmp_path, header + "sys.exit(75)\n"), "1", "1")
    with pytest.raises(record.RecordError, match=r"stopped \(exit 3\) between calls after line 1"):
        record.record(_fake_probe(tmp_path, header + "sys.exit(3)\n"), "1", "1")
    with pytest.raises(record.RecordError, match=r"calls are not 0\.\.2 in order"):
        record.check_complete(['{"header":{"edges":2,"generated":1}}', '{"i":0}', '{"i":2}'])
