"""What several commands read: results files. Each problem with them is a
:class:`.output.CommandError` with the exit status the commands document."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .output import CommandError, message

if TYPE_CHECKING:
    from ..results.model import ResultsDocument


def read_document(path: Path) -> ResultsDocument:
    from ..results.store import ReportError, read_results

    try:
        return read_results(path)
    except ReportError as exc:
        raise CommandError(str(exc)) from None


def load_results(args: argparse.Namespace, *, required: bool = False) -> list[ResultsDocument]:
    from .options import results_files

    paths = results_files(args, message)
    if required and not paths:
        raise CommandError(f"{args.command} needs at least one results file (RESULTS.json ...)")
    args.results = paths
    return [read_document(path) for path in paths]
