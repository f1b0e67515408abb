"""``tileconform`` (also ``python -m pytest_tileconform``): commands around tile matrices and results.

Data goes to stdout (or to ``-o FILE``, written atomically), messages to stderr. Exit status:
0 success, 1 the command worked and found what it was asked to flag (``drift --strict``),
2 bad usage or unreadable input, 3 a needed tool or FlashInfer itself is missing or failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_FLAGGED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class CommandError(Exception):
    """A failure to report on stderr as ``tileconform: message``, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def emit(text: str, output: Path | None) -> None:
    """Write data to ``output`` atomically, or to stdout."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    from .update import write_atomic

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    message(f"wrote {output}")


def message(text: str) -> None:
    print(f"tileconform: {text}", file=sys.stderr, flush=True)


# -- report merge ------------------------------------------------------------------------------
def _report_merge(args: argparse.Namespace) -> int:
    from .merge import ReportError, merge, to_html, to_markdown

    try:
        merged = merge(args.results)
    except ReportError as exc:
        raise CommandError(str(exc)) from None
    for warning in merged.warnings:
        message(f"warning: {warning}")
    if not merged.devices:
        message("warning: no case in these files has a verdict")
    if args.html is not None:
        emit(to_html(merged), args.html)
    if args.html is None or args.output is not None:
        emit(to_markdown(merged), args.output)
    return EXIT_OK


def _add_report(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = subparsers.add_parser(
        "report",
        help="work with --tile-report results files",
        description="Work with --tile-report results files.",
    )
    actions = report.add_subparsers(dest="action", metavar="ACTION", required=True)
    merge = actions.add_parser(
        "merge",
        help="merge results files into one compatibility table (Markdown and/or HTML)",
        description="Merge --tile-report results files from several runners, architectures and "
        "shards into one compatibility table: one row per device fingerprint (GPU or virtual "
        "profile, compute capability, opt-in shared memory, driver, CUDA, FlashInfer, nvcc), one "
        "table per architecture and dtypes, one column per CTA tile. Markdown goes to stdout "
        "unless -o is given; --html writes a self-contained HTML page (then Markdown is written "
        "only if -o is given too).",
    )
    merge.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json", help="--tile-report files")
    merge.add_argument("-o", "--output", type=Path, default=None, metavar="FILE", help="write Markdown here")
    merge.add_argument("--html", type=Path, default=None, metavar="FILE", help="write an HTML page here")
    merge.set_defaults(handler=_report_merge)


# -- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tileconform",
        description="Tile matrices that follow FlashInfer, and what the results of "
        "pytest --tile-matrix say across runners.",
        epilog="Exit status: 0 ok, 1 flagged (drift --strict), 2 bad usage or input, "
        "3 a needed tool or FlashInfer is missing or failed.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _COMMANDS:
        add(subparsers)
    return parser


_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [_add_report]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CommandError as exc:
        message(str(exc))
        return exc.status
    except KeyboardInterrupt:
        message("interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
