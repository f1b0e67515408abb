"""Hostile ``--tactics`` files (saved tactics probe output): ``parse`` answers tactics or one
``ProbeError`` naming the line; through ``drift``/``export-blocklist`` a file that cannot be read
is exit 2, lines that are not probe output exit 3 (the probe's own convention, which
tests/flashinfer/commands/test_cli_drift.py pins), never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.cli_corpus import VALID_RESULTS, VALID_TACTICS, tileconform

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.commands import inputs
from pytest_tileconform.flashinfer.tactics.offered import ProbeError, parse

LINE: dict[str, Any] = json.loads(VALID_TACTICS.read_text().splitlines()[0])


def _line(**changes: Any) -> str:
    row = dict(LINE)
    for key, value in changes.items():
        if value is ...:
            del row[key]
        else:
            row[key] = value
    return json.dumps(row)


# (id, text of the file, message fragment, or None: parses)
TEXTS: list[tuple[str, str, str | None]] = [
    ("valid-line", _line(), None),
    ("blank-lines-only", "\n\n  \n", None),
    ("not-json", "{oops", "line 1 is not JSON"),
    ("json-array", "[1, 2]", "expected a JSON object"),
    ("json-string", '"sm"', "expected a JSON object"),
    ("json-null", "null", "expected a JSON object"),
    ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("no-sm", _line(sm=...), "no 'sm'"),
    ("no-runner", _line(runner=...), "no 'runner'"),
    ("no-gemm", _line(gemm=...), "no 'gemm'"),
    ("no-tactic", _line(tactic=...), "no 'tactic'"),
    ("no-tma-ws", _line(tma_ws=...), "no 'tma_ws'"),
    ("no-dispatch", _line(dispatch=...), "no 'dispatch'"),
    ("sm-string", _line(sm="ninety"), "expected an integer"),
    ("sm-numeric-string", _line(sm="120"), "expected an integer"),
    ("sm-float", _line(sm=120.5), "expected an integer"),
    ("sm-bool", _line(sm=True), "expected an integer"),
    ("sm-list", _line(sm=[120]), "expected an integer"),
    ("runner-int", _line(runner=5), "expected a string"),
    ("runner-unknown-act", _line(runner="zzz-bf16"), "unknown dtype 'zzz'"),
    ("runner-unknown-out", _line(runner="nvfp4-int2"), "unknown dtype 'int2'"),
    ("runner-empty", _line(runner=""), "unknown dtype ''"),
    ("tactic-null", _line(tactic=None), "expected an integer"),
    ("tma-ws-string", _line(tma_ws="yes"), "expected true or false"),
    ("tile-bytes-short", _line(tile_bytes=[128, 128]), "three integers"),
    ("tile-bytes-string", _line(tile_bytes="128x128x64"), "three integers"),
    ("tile-bytes-strings", _line(tile_bytes=["a", "b", "c"]), "expected an integer"),
    ("cluster-object", _line(cluster={"m": 1}), "three integers"),
    ("epilogue-string", _line(epilogue_schedule="void"), "expected an integer"),
    ("fusion-int", _line(fusion=1), "expected a string"),
    ("swap-ab-int", _line(swap_ab=1), "expected true or false"),
    ("instantiation-list", _line(instantiation=[1]), "expected an object"),
    ("instantiation-no-tile", _line(instantiation={"arch": 120}), "no tile"),
    ("instantiation-tile-bad", _line(instantiation={"tile": [1, 2]}), "three integers"),
    ("error-list", _line(error=["x"]), "expected a string"),
    (
        "offered-error",
        json.dumps({"sm": 120, "runner": "x", "gemm": 1, "offered_error": "boom"}),
        "getConfigs failed",
    ),
    ("offered-error-bare", json.dumps({"offered_error": "boom"}), "getConfigs failed"),
    ("second-line-bad", _line() + "\n" + _line(sm=...), "line 2: no 'sm'"),
    (
        "tactic-of-5000-digits",
        _line().replace(f'"tactic": {LINE["tactic"]}', '"tactic": ' + "9" * 5000),
        "line 1: an integer of 5,000 digits; the probe writes none over 20",
    ),
    (
        "sm-of-5000-digits",
        _line(sm=0).replace('"sm": 0', '"sm": ' + "1" * 5000),
        "an integer of 5,000 digits",
    ),
    ("tactic-of-20-digits", _line(tactic=10**19), None),
]


@pytest.mark.parametrize(("text", "fragment"), [t[1:] for t in TEXTS], ids=[t[0] for t in TEXTS])
def test_parse(text: str, fragment: str | None) -> None:
    if fragment is None:
        assert all(t.sm == 120 for t in parse(text.splitlines()))
        return
    with pytest.raises(ProbeError) as info:
        parse(text.splitlines())
    assert fragment in str(info.value)


THROUGH_MAIN = (
    "not-json",
    "no-sm",
    "sm-string",
    "instantiation-list",
    "runner-unknown-act",
    "tactic-of-5000-digits",
)


@pytest.mark.parametrize("row", [t for t in TEXTS if t[0] in THROUGH_MAIN], ids=lambda r: r[0])
@pytest.mark.parametrize("command", ["drift", "export-blocklist"])
def test_through_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: tuple[str, str, str], command: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(row[1])
    extra = [str(VALID_RESULTS), "--accept-virtual", "--gpu", "X"] if command == "export-blocklist" else []
    assert main([command, "--arch", "sm120", "--tactics", str(path), *extra]) == 3
    err = capsys.readouterr().err
    assert row[2] in err and str(path) in err and err.startswith("tileconform: ")


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "t.jsonl")
    return tmp / "t.jsonl"


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: (tmp / "t.jsonl").write_bytes(b'{"sm": "\xe9"}') and tmp / "t.jsonl", "not UTF-8 text"),
        (
            lambda tmp: (tmp / "t.jsonl").write_bytes('{"sm": 1}'.encode("utf-16")) and tmp / "t.jsonl",
            "not UTF-8 text",
        ),
        (_fifo, "is a FIFO"),
        (lambda tmp: Path("/dev/zero"), "is a character device"),
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: tmp / "missing.jsonl", "No such file"),
    ],
    ids=["latin-1", "utf-16", "fifo", "dev-zero", "directory", "missing"],
)
def test_unreadable_tactics_files_exit_2(tmp_path: Path, make, fragment: str) -> None:  # type: ignore[no-untyped-def]
    proc = tileconform("drift", "--arch", "sm120", "--tactics", str(make(tmp_path)))
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr


def test_a_tactics_file_over_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(inputs, "MAX_TACTICS_BYTES", 100)
    path = tmp_path / "t.jsonl"
    path.write_text(_line())
    assert main(["drift", "--arch", "sm120", "--tactics", str(path)]) == 2
    assert "more than the 100 a tactics file may have" in capsys.readouterr().err
