"""Options more than one ``tileconform`` command takes, declared once so they read the same."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..archs import KNOWN

#: ``--results``, kept so that command lines written before results files became positional
#: still work; :func:`results_files` warns about it.
DEPRECATED_RESULTS = "--results"


def add_arch(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, text: str = "the GPU architecture"
) -> None:
    parser.add_argument("--arch", required=True, type=str.lower, choices=KNOWN, help=text)


def add_results(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """Results files as arguments, the way ``report merge`` takes them; ``--results FILE`` still
    works (hidden from --help). A command that needs one checks :func:`results_files`' answer,
    since argparse cannot require 'arguments or --results'; ``required`` only words the help."""
    parser.add_argument(
        "results",
        nargs="*",
        type=Path,
        metavar="RESULTS.json",
        help="--tile-report files with observed verdicts" + (" (at least one)" if required else ""),
    )
    parser.add_argument(
        DEPRECATED_RESULTS,
        dest="results_option",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help=argparse.SUPPRESS,
    )


def results_files(args: argparse.Namespace, warn: Callable[[str], None]) -> list[Path]:
    """The results files of a command line: the arguments, then any ``--results`` (with a
    deprecation warning through ``warn``)."""
    deprecated: list[Path] = args.results_option
    if deprecated:
        warn(
            f"warning: {DEPRECATED_RESULTS} is deprecated: give results files as arguments "
            f"({' '.join(str(p) for p in deprecated)})"
        )
    return [*args.results, *deprecated]


def add_output(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "-o", "--output", type=Path, default=None, metavar="FILE", help=f"write {what} here (default: stdout)"
    )
