"""Hostile results files: every one ends in a valid document or one ``ReportError`` that names
the file and says what is wrong; through ``tileconform`` that is exit 2 and one message, never a
traceback. Each row documents its expected outcome: a message fragment, or ``None`` for a file
that is valid despite its looks."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.cli_corpus import VALID_RESULTS, tileconform, valid_document

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.axes import RecordError, recorded_axes
from pytest_tileconform.results import store
from pytest_tileconform.results.store import ReportError, read_results


def _doc(**changes: Any) -> bytes:
    data = valid_document()
    data.update(changes)
    return json.dumps(data).encode()


def _case(path: tuple[str | int, ...], value: Any) -> bytes:
    """The valid document with ``cases[0]`` changed at ``path`` (``...`` deletes the key)."""
    data = valid_document()
    node: Any = data["cases"][0]
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return json.dumps(data).encode()


def _nested(depth: int, inner: str = "[]") -> bytes:
    return ("[" * depth + inner + "]" * depth).encode()


# (id, bytes of the file, name suffix, expected message fragment or None for a valid file)
BYTES: list[tuple[str, bytes, str, str | None]] = [
    ("empty", b"", ".json", "not JSON"),
    ("whitespace", b" \n\t ", ".json", "not JSON"),
    ("nul-bytes", b"\0" * 64, ".json", "not JSON"),
    ("latin-1", b'{"format": 1, "cases": [], "created": "\xe9"}', ".json", "not UTF-8 text"),
    ("utf-16-le-bom", '{"format": 1, "cases": []}'.encode("utf-16"), ".json", "UTF-16 text"),
    ("utf-16-be-bom", b"\xfe\xff" + '{"format": 1}'.encode("utf-16-be"), ".json", "UTF-16 text"),
    ("utf-16-no-bom", '{"format": 1, "cases": []}'.encode("utf-16-le"), ".json", "not JSON"),
    ("utf-8-bom", b"\xef\xbb\xbf" + json.dumps(valid_document()).encode(), ".json", None),
    ("truncated", json.dumps(valid_document()).encode()[:-7], ".json", "not JSON"),
    ("trailing-garbage", json.dumps(valid_document()).encode() + b"}}", ".json", "not JSON"),
    ("json-array", b"[]", ".json", "not a tileconform results file"),
    ("json-string", b'"cases"', ".json", "not a tileconform results file"),
    ("json-null", b"null", ".json", "not a tileconform results file"),
    ("json-number", b"1e999", ".json", "not a tileconform results file"),
    ("no-cases", b'{"format": 2}', ".json", "no 'cases'"),
    ("nested-array-100k", _nested(100_000), ".json", "nested too deeply"),
    ("nested-object-100k", b'{"a":' * 100_000 + b"1" + b"}" * 100_000, ".json", "nested too deeply"),
    ("nested-array-500", _nested(500), ".json", "nested"),
    ("nested-in-extra", _case(("verdict", "extra", "x"), json.loads(_nested(200))), ".json", "nested deeper"),
    ("nested-unclosed", b"[" * 200_000, ".json", "nested too deeply"),
    ("yaml-not-json", b"format: 2\ncases: []\n", ".json", "not JSON"),
    ("gz-not-gzip", b"not gzip", ".json.gz", "not a readable gzip file"),
    ("gz-truncated", gzip.compress(json.dumps(valid_document()).encode())[:40], ".json.gz", "gzip"),
    ("gz-valid", gzip.compress(json.dumps(valid_document()).encode()), ".json.gz", None),
    ("gz-empty", gzip.compress(b""), ".json.gz", "not JSON"),
    ("gz-of-gz", gzip.compress(gzip.compress(b"{}")), ".json.gz", "not UTF-8"),
    ("gz-latin-1", gzip.compress(b'{"created": "\xe9"}'), ".json.gz", "not UTF-8 text"),
    ("nan-duration", _case(("duration_s",), float("nan")), ".json", None),
    ("huge-int-smem", _case(("verdict", "smem_requested"), 10**300), ".json", "a number of 301 characters"),
    ("int-of-40-characters", _case(("verdict", "smem_requested"), 10**39), ".json", None),
    (
        "int-of-5000-digits",
        _case(("verdict", "smem_requested"), 1).replace(
            b'"smem_requested": 1', b'"smem_requested": ' + b"9" * 5000
        ),
        ".json",
        "a number of 5,000 characters; no field of a results file has more than 40",
    ),
    (
        "int-of-5000-digits-as-format",
        json.dumps(valid_document()).encode().replace(b'"format": 1', b'"format": ' + b"1" * 5000),
        ".json",
        "a number of 5,000 characters",
    ),
    (
        "float-of-5000-digits",
        _case(("duration_s",), 0.5).replace(b"0.5", b"0." + b"5" * 5000),
        ".json",
        "5,002",
    ),
    ("lone-surrogate-in-id", _case(("id",), "sm90-x\ud800"), ".json", "holds a lone surrogate"),
    ("lone-surrogate-in-a-key", _case(("verdict", "extra", "\udfff"), 1), ".json", "holds a lone surrogate"),
    ("lone-surrogate-in-detail", _case(("verdict", "detail"), "\udc80 x"), ".json", "lone surrogate"),
    ("surrogate-pair-is-text", _case(("verdict", "detail"), "\U0001f600"), ".json", None),
]

FORMATS: list[tuple[str, Any, str]] = [
    ("format-true", True, "results format True"),
    ("format-float", 1.0, "results format 1.0"),
    ("format-string", "2", "results format '2'"),
    ("format-4", 4, "results format 4"),  # the first this version does not read
    ("format-0", 0, "results format 0"),
    ("format-negative", -1, "results format -1"),
    ("format-list", [2], "results format [2]"),
    ("format-object", {"v": 2}, "results format"),
    ("format-null", None, "results format None"),
]

# wrong-typed or wrong-valued fields of cases[0]: (id, path, value, fragment)
FIELDS: list[tuple[str, tuple[str | int, ...], Any, str]] = [
    ("id-missing", ("id",), ..., "cases[0]: missing 'id'"),
    ("id-list", ("id",), ["a"], "cases[0].id"),
    ("id-object", ("id",), {"a": 1}, "cases[0].id"),
    ("id-null", ("id",), None, "cases[0].id"),
    ("case-string", ("case",), "sm90", "cases[0].case"),
    ("case-list", ("case",), [], "cases[0].case"),
    ("case-arch-missing", ("case", "arch"), ..., "missing 'arch'"),
    ("case-arch-int", ("case", "arch"), 90, "cases[0].case.arch"),
    ("case-tile-bad", ("case", "tile"), "128x128", "cases[0].case.tile"),
    ("case-tile-int", ("case", "tile"), 128, "cases[0].case.tile"),
    ("verdict-string", ("verdict",), "pass", "cases[0].verdict"),
    ("verdict-list", ("verdict",), [], "cases[0].verdict"),
    ("stage-unknown", ("verdict", "failed_stage"), "lunch", "failed_stage"),
    ("stage-int", ("verdict", "failed_stage"), 3, "failed_stage"),
    ("judged-through-missing", ("verdict", "judged_through"), ..., "missing 'judged_through'"),
    ("judged-through-unknown", ("verdict", "judged_through"), "moon", "judged_through"),
    ("outcome-unknown", ("verdict", "outcome"), "maybe", "outcome"),
    ("smem-string", ("verdict", "smem_requested"), "lots", "smem_requested"),
    ("smem-float", ("verdict", "smem_requested"), 1.5, "smem_requested"),
    ("smem-list", ("verdict", "smem_requested"), [1], "smem_requested"),
    ("extra-list", ("verdict", "extra"), [1, 2], "extra"),
    ("extra-string", ("verdict", "extra"), "x", "extra"),
    ("source-int", ("verdict", "source"), 1, "source"),
    ("status-object", ("verdict", "status"), {}, "status"),
    ("duration-string", ("duration_s",), "fast", "duration_s"),
    ("expected-unknown", ("expected",), "sometimes", "expected"),
    ("verdict-unknown-key", ("verdict", "mood"), "ok", "unknown key 'mood'"),
    (
        "outcome-pass-over-a-failed-stage",
        ("verdict", "failed_stage"),
        "compile",
        "cases[0].verdict: outcome 'pass' contradicts failed_stage 'compile'",
    ),
    (
        "outcome-a-stage-over-a-pass",
        ("verdict", "outcome"),
        "launch",
        "outcome 'launch' contradicts failed_stage None",
    ),
]

# the backend's keys of cases[0]: the core keeps them as written, FlashInfer's record refuses them
BACKEND_FIELDS: list[tuple[str, tuple[str | int, ...], Any, str]] = [
    ("case-unknown-key", ("case", "colour"), "red", "colour: unknown key"),
    ("case-cluster-bad", ("case", "cluster"), "2x", "cluster: String should match"),
    ("case-swap-ab-list", ("case", "swap_ab"), [True], "swap_ab: Input should be a valid boolean"),
    ("case-swap-ab-word", ("case", "swap_ab"), "maybe", "swap_ab: Input should be a valid boolean"),
    # the problem is FlashInfer's (flashinfer/axes.py's ProblemRecord), not the core's
    ("problem-rows-string", ("case", "problem", "rows"), "0,1", "rows"),
    ("problem-rows-floats", ("case", "problem", "rows"), [0.5], "rows"),
    ("problem-n-string", ("case", "problem", "n"), "many", "problem.n"),
    ("problem-list", ("case", "problem"), [1, 2], "problem"),
]

DOCS: list[tuple[str, bytes, str]] = [
    ("cases-object", _doc(cases={"a": 1}), "cases"),
    ("cases-string", _doc(cases="all"), "cases"),
    ("cases-null", _doc(cases=None), "cases"),
    ("cases-of-ints", _doc(cases=[1, 2, 3]), "cases[0]"),
    ("cases-of-lists", _doc(cases=[[]]), "cases[0]"),
    ("cases-of-nulls", _doc(cases=[None]), "cases[0]"),
    ("host-list", _doc(host=[1]), "host"),
    ("host-gpus-string", _doc(host={"fingerprint": {"gpus": "H200"}}), "gpus"),
    ("created-int", _doc(created=5), "created"),
    ("unknown-top-key", _doc(colour="red"), "unknown key 'colour'"),
    ("many-problems", _doc(cases=[{"id": i} for i in range(50)]), "more problem(s)"),
    (
        "a-case-judged-twice",
        _doc(cases=[*valid_document()["cases"], valid_document()["cases"][0]]),
        "cases[2]: case 'sm120-nvfp4-bf16-128x32x128-c1x1x1-none' of /work/main/matrices/sm120.yaml is in "
        "the file twice (first at cases[0]): a run judges a case once",
    ),
    (
        "a-case-twice-without-its-matrix",
        _doc(
            cases=[{**c, "matrix": None} for c in [*valid_document()["cases"], valid_document()["cases"][1]]]
        ),
        "cases[2]: case 'sm120-nvfp4-bf16-128x32x128-c1x1x1-finalize' is in the file twice",
    ),
]


@pytest.mark.parametrize(("data", "suffix", "fragment"), [r[1:] for r in BYTES], ids=[r[0] for r in BYTES])
def test_bytes(tmp_path: Path, data: bytes, suffix: str, fragment: str | None) -> None:
    path = tmp_path / f"r{suffix}"
    path.write_bytes(data)
    if fragment is None:
        assert read_results(path).cases
        return
    with pytest.raises(ReportError, match=r"r\.json") as info:
        read_results(path)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("value", "fragment"), [r[1:] for r in FORMATS], ids=[r[0] for r in FORMATS])
def test_format_field(tmp_path: Path, value: Any, fragment: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(_doc(format=value))
    with pytest.raises(ReportError, match="is not one this version reads") as info:
        read_results(path)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("where", "value", "fragment"), [r[1:] for r in FIELDS], ids=[r[0] for r in FIELDS])
def test_case_fields(tmp_path: Path, where: tuple[str | int, ...], value: Any, fragment: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(_case(where, value))
    with pytest.raises(ReportError) as info:
        read_results(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("where", "value", "fragment"), [r[1:] for r in BACKEND_FIELDS], ids=[r[0] for r in BACKEND_FIELDS]
)
def test_backend_fields(tmp_path: Path, where: tuple[str | int, ...], value: Any, fragment: str) -> None:
    """A backend's keys are its own: the core reads the file, FlashInfer's record refuses them."""
    path = tmp_path / "r.json"
    path.write_bytes(_case(where, value))
    record = read_results(path).cases[0].case
    assert record is not None
    with pytest.raises(RecordError) as info:
        recorded_axes(record.coordinates())
    assert fragment in str(info.value)


@pytest.mark.parametrize(("data", "fragment"), [r[1:] for r in DOCS], ids=[r[0] for r in DOCS])
def test_documents(tmp_path: Path, data: bytes, fragment: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(ReportError) as info:
        read_results(path)
    assert fragment in str(info.value)


# -- sizes: the caps, lowered here so the corpus stays small; one child process keeps the real one
def test_a_file_over_the_cap_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "MAX_RESULTS_BYTES", 1000)
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1001)
    with pytest.raises(ReportError, match="is 1,001 bytes, more than the 1,000 a results file may have"):
        read_results(path)


def test_a_gz_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "MAX_RESULTS_BYTES", 1 << 20)
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b" " * (64 << 20), compresslevel=9))
    assert path.stat().st_size < 200_000
    with pytest.raises(ReportError, match="decompresses to more than 1,048,576 bytes"):
        read_results(path)


def test_a_sparse_huge_file_with_the_real_cap(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(store.MAX_RESULTS_BYTES + 1)  # sparse: no disk used
    proc = tileconform("report", "compare", str(path), str(VALID_RESULTS))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "more than the 268,435,456 a results file may have" in proc.stderr


# -- not regular files: refused without blocking; a child process bounds each one
def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    return tmp_path / "a.json"


def _dangling(tmp_path: Path) -> Path:
    (tmp_path / "d.json").symlink_to(tmp_path / "nowhere.json")
    return tmp_path / "d.json"


def _unreadable_dir_member(tmp_path: Path) -> Path:
    return tmp_path / "not-a-dir.json" / "r.json"


SPECIAL: list[tuple[str, Callable[[Path], Path], str]] = [
    ("fifo", _fifo, "is a FIFO, not a regular results file"),
    ("dev-zero", lambda _: Path("/dev/zero"), "is a character device, not a regular results file"),
    ("dev-null", lambda _: Path("/dev/null"), "is a character device"),
    ("dev-urandom", lambda _: Path("/dev/urandom"), "is a character device"),
    ("directory", lambda tmp: tmp, "is a directory, not a regular results file"),
    ("symlink-loop", _loop, "Too many levels of symbolic links"),
    ("dangling-symlink", _dangling, "No such file or directory"),
    ("missing", lambda tmp: tmp / "missing.json", "No such file or directory"),
    ("proc-self-status", lambda _: Path("/proc/self/status"), "not JSON"),
    ("stdin", lambda _: Path("/dev/stdin"), "not a regular results file"),
]


@pytest.mark.parametrize(("make", "fragment"), [r[1:] for r in SPECIAL], ids=[r[0] for r in SPECIAL])
def test_not_regular_files_through_the_command(
    tmp_path: Path, make: Callable[[Path], Path], fragment: str
) -> None:
    path = make(tmp_path)
    proc = tileconform("report", "diff", str(path), str(VALID_RESULTS))
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("tileconform: ")


# -- a representative subset through the real command line, in process
THROUGH_MAIN = ("latin-1", "utf-16-le-bom", "nested-array-100k", "gz-not-gzip")


@pytest.mark.parametrize("row", [r for r in BYTES if r[0] in THROUGH_MAIN], ids=lambda r: r[0])
@pytest.mark.parametrize(
    "command", [["report", "compare"], ["report", "diff"], ["report", "merge"], ["drift"]]
)
def test_through_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: tuple[str, bytes, str, str], command: list[str]
) -> None:
    _, data, suffix, fragment = row
    path = tmp_path / f"r{suffix}"
    path.write_bytes(data)
    extra = [
        "--arch",
        "sm120",
        "--tactics",
        str(Path(__file__).parents[1] / "data" / "tactics-sm120-drift.jsonl"),
    ]
    argv = [*command, str(path)] + ([str(VALID_RESULTS)] if command[0] == "report" else extra)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.startswith("tileconform: ")


def test_a_deep_document_is_refused_by_the_validator_too() -> None:
    data = valid_document()
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    data["cases"][0]["verdict"]["extra"] = {"deep": copy.deepcopy(deep)}
    doc = store.parse_results(data, "x.json")  # parsed JSON from elsewhere: valid, not recursed
    assert doc.cases[0].verdict is not None


def test_a_case_judged_twice_cannot_hide_a_regression_from_diff(tmp_path: Path) -> None:
    """NEW judges a case twice, failing then passing: keyed by case, the pass would replace the
    failure and ``report diff`` would pass the gate; the file is refused instead (exit 2)."""
    data = valid_document()
    failing = copy.deepcopy(data["cases"][0])
    failing["verdict"].update(failed_stage="launch", outcome="launch")
    failing["outcome"] = "failed"
    data["cases"] = [failing, *data["cases"]]
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    proc = tileconform("report", "diff", str(VALID_RESULTS), str(new))
    assert proc.returncode == 2, proc.stdout
    assert "is in the file twice (first at cases[0])" in proc.stderr and "Traceback" not in proc.stderr


def test_many_small_objects_are_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "MAX_CONTAINERS", 1000)
    path = tmp_path / "many.json"
    path.write_text('{"format": 3, "cases": [' + ", ".join(["{}"] * 1000) + "]}")
    with pytest.raises(ReportError, match=r"1,002 JSON objects and arrays, more than the 1,000"):
        read_results(path)


def test_255_mb_of_empty_objects_with_the_real_caps(tmp_path: Path) -> None:
    """Just under the size cap, 85 M ``{}`` would be several gigabytes of dicts once parsed: the
    child process, held to 2 GB of address space, refuses the file with one line instead."""
    path = tmp_path / "objects.json"
    size = store.MAX_RESULTS_BYTES - (1 << 20)
    with path.open("w") as handle:
        handle.write('{"format": 3, "cases": [')
        chunk = "{}," * (1 << 20)
        while handle.tell() < size - len(chunk):
            handle.write(chunk)
        handle.write("{}]}")
    assert path.stat().st_size <= store.MAX_RESULTS_BYTES
    script = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
        "from pytest_tileconform.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "report", "compare", str(path), str(VALID_RESULTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "JSON objects and arrays, more than the 4,000,000 a results file may hold" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr


@pytest.mark.parametrize(
    "command", [["report", "merge", "--html"], ["report", "merge", "-o"], ["report", "diff"]]
)
def test_a_lone_surrogate_reaches_no_writer(tmp_path: Path, command: list[str]) -> None:
    """JSON's \\ud800 escape decodes to a string no writer can encode (the HTML merge, Markdown,
    the terminal): the file is refused as it is read, exit 2, and nothing is written."""
    path = tmp_path / "r.json"
    path.write_bytes(_case(("id",), "sm120-x\ud800"))
    out = tmp_path / "out.html"
    argv = (
        [*command, str(out), str(path)] if command[-1].startswith("-") else [*command, str(path), str(path)]
    )
    proc = tileconform(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "holds a lone surrogate" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
