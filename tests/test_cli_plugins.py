"""A plugin adds ``tileconform`` commands through ``pytest_tileconform_add_commands``, beside the
core's and the FlashInfer wing's, without any edit to the command line's module."""

from __future__ import annotations

import argparse

import pytest

from pytest_tileconform.commands.cli import build_parser, main


class Greeter:
    """A third plugin's command, given as ``main(plugins=...)`` gives plugin objects."""

    def pytest_tileconform_add_commands(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None:
        hello = subparsers.add_parser("hello", help="say hello")
        hello.add_argument("--name", default="world")
        hello.set_defaults(handler=lambda args: print(f"hello {args.name}") or 7)


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(found.choices)


def test_a_plugin_adds_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hello", "--name", "tiles"], plugins=[Greeter()]) == 7
    assert capsys.readouterr().out == "hello tiles\n"
    with pytest.raises(SystemExit):
        main(["hello"])  # not a command without the plugin


def test_the_flashinfer_commands_come_from_its_installed_plugin() -> None:
    """The FlashInfer wing's commands are found through its ``pytest11`` entry point, as pytest
    finds the plugin; the core adds only ``report``."""
    flashinfer = {"gen-matrix", "drift", "tactics", "export-blocklist", "bisect", "matrices"}
    assert _commands(build_parser()) == {"report", *flashinfer}
    assert _commands(build_parser([Greeter()])) == {"report", "hello", *flashinfer}
