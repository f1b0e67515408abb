"""A plugin adds ``tileconform`` commands through ``pytest_tileconform_add_commands``, beside the
core's and the FlashInfer wing's, without any edit to the command line's module."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from helpers.evidence import document as report_document
from helpers.evidence import report

from pytest_tileconform.commands.cli import build_parser, main
from pytest_tileconform.results.fingerprint import HostColumn
from pytest_tileconform.results.merge import CaseNote
from pytest_tileconform.verdict import UnusableEnvironment

RESULTS = report("sm120-virtual")


class Refuser:
    """A command whose host cannot do it: the environment's one line, as the build cache says it."""

    def pytest_tileconform_add_commands(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None:
        def refuse(args: argparse.Namespace) -> int:
            raise UnusableEnvironment("the cache at /x is read-only: point --cache-dir elsewhere")

        subparsers.add_parser("refuse").set_defaults(handler=refuse)


class Greeter:
    """A third plugin's command, given as ``main(plugins=...)`` gives plugin objects."""

    def pytest_tileconform_add_commands(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None:
        hello = subparsers.add_parser("hello", help="say hello")
        hello.add_argument("--name", default="world")
        hello.set_defaults(handler=lambda args: print(f"hello {args.name}") or 7)

    def pytest_tileconform_add_merge_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--shout", action="store_true")

    def pytest_tileconform_host_columns(self) -> list[HostColumn]:
        return [HostColumn("python_of_host", "host's python")]

    def pytest_tileconform_merge_note(self, args: argparse.Namespace) -> CaseNote | None:
        return CaseNote("tile, loud", lambda case: case.tile.upper(), "?") if args.shout else None


class Waver:
    """A fourth plugin that answers ``hello`` too: it joins the command Greeter added."""

    @pytest.hookimpl(trylast=True)
    def pytest_tileconform_add_commands(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None:
        hello = subparsers.add_parser("hello", help="wave")
        previous = hello.get_default("handler")
        hello.add_argument("--wave", action="store_true")
        hello.set_defaults(handler=lambda args: (print("~") or 8) if args.wave else previous(args))


def test_a_command_the_host_cannot_do_exits_3_with_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["refuse"], plugins=[Refuser()]) == 3
    captured = capsys.readouterr()
    assert captured.err == "tileconform: the cache at /x is read-only: point --cache-dir elsewhere\n"
    assert captured.out == ""


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(found.choices)


def test_a_plugin_adds_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hello", "--name", "tiles"], plugins=[Greeter()]) == 7
    assert capsys.readouterr().out == "hello tiles\n"
    with pytest.raises(SystemExit):
        main(["hello"])  # not a command without the plugin


def test_a_second_plugin_joins_a_command_the_first_added(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse refuses a second parser of one name; the hook hands the first back to join."""
    assert main(["hello", "--wave"], plugins=[Greeter(), Waver()]) == 8
    assert main(["hello", "--name", "both"], plugins=[Greeter(), Waver()]) == 7
    assert capsys.readouterr().out == "~\nhello both\n"


def test_the_flashinfer_commands_come_from_its_installed_plugin() -> None:
    """The FlashInfer wing's commands are found through its ``pytest11`` entry point, as pytest
    finds the plugin; the core adds ``report`` and ``cache``."""
    flashinfer = {"gen-matrix", "drift", "tactics", "export-blocklist", "bisect", "matrices"}
    assert _commands(build_parser()) == {"report", "cache", *flashinfer}
    assert _commands(build_parser([Greeter()])) == {"report", "cache", "hello", *flashinfer}


def test_a_plugin_adds_a_column_to_report_merge(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "merge", str(RESULTS), "--shout"], plugins=[Greeter()]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| row | case |"))
    assert header.rstrip(" |").endswith("| tile, loud")
    row = next(line for line in out.splitlines() if "`sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize`" in line)
    assert row.rstrip(" |").split("| ")[-1] == "128X256X128"
    assert main(["report", "merge", str(RESULTS)], plugins=[Greeter()]) == 0
    assert "tile, loud" not in capsys.readouterr().out


def test_a_plugin_adds_a_device_column_to_report_merge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backend's field of the host fingerprint becomes a column of every device row, beside
    FlashInfer's."""
    document = report_document(RESULTS)
    document["host"].setdefault("fingerprint", {})["python_of_host"] = "3.99"
    results = tmp_path / "r.json"
    results.write_text(json.dumps(document))
    assert main(["report", "merge", str(results)], plugins=[Greeter()]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| row | device |"))
    assert "| FlashInfer |" in header and "| host's python |" in header
    rows = [line for line in lines if line.startswith("| D1 |") and "virtual" in line]
    assert rows and all("| 3.99 |" in row for row in rows)
