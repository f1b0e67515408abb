"""``tileconform`` (also ``python -m pytest_tileconform``): commands around tile matrices and results.

Data goes to stdout (or to ``-o FILE``, written atomically), messages to stderr. Exit status:
0 success, 1 the command worked and found what it was asked to flag (``drift --strict``),
2 bad usage or unreadable input, 3 a needed tool or FlashInfer itself is missing or failed.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..verdict import UnusableEnvironment
from . import cache
from .inputs import read_document
from .output import EXIT_ENVIRONMENT, EXIT_FLAGGED, EXIT_OK, CommandError, emit, message, quiet_stdout
from .plugins import CommandPlugins, Commands, command_plugins


# -- report ------------------------------------------------------------------------------------
def _report_merge(plugins: CommandPlugins, args: argparse.Namespace) -> int:
    from ..matrix.kinds import records_of
    from ..results.merge import merge, to_markdown
    from ..results.merge_html import to_html
    from ..results.store import ReportError

    note = plugins.hook.pytest_tileconform_merge_note(args=args)
    columns = [column for found in plugins.hook.pytest_tileconform_host_columns() for column in found]
    try:
        merged = merge(args.results, note, columns, records_of(plugins.kinds().values()))
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


def _report_compare(args: argparse.Namespace) -> int:
    from ..results.compare import compare, report_lines

    first, second = read_document(args.a), read_document(args.b)
    result = compare(first, second)
    emit("\n".join(report_lines(result, str(args.a), str(args.b))), None)
    if result.compared == 0:
        raise CommandError(f"no case was judged in both {args.a} and {args.b}")
    return EXIT_OK if result.agree else EXIT_FLAGGED


def _report_diff(args: argparse.Namespace) -> int:
    from ..results.diff import diff, to_markdown

    old, new = read_document(args.old), read_document(args.new)
    result = diff(old, new)
    if not result.matched and old.cases and new.cases:
        message(f"warning: no case of {args.new} is in {args.old}: is it the right baseline?")
    emit(to_markdown(result, old, new, str(args.old), str(args.new)), args.output)
    regressions = result.new_regressions
    if regressions:
        message(f"{len(regressions)} new regression(s) in {args.new} that {args.old} did not have")
        return EXIT_FLAGGED
    return EXIT_OK


def _report_schema(args: argparse.Namespace) -> int:
    import json

    from ..results.model import json_schema

    emit(json.dumps(json_schema(), indent=1), args.output)
    return EXIT_OK


def _add_report(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], plugins: CommandPlugins
) -> None:
    from . import apply
    from .options import add_output

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
        "table per architecture and dtypes, one column per CTA tile. A cell counts its cases by "
        "verdict against expectation: pass, known-bad (failed at its expected stage), regression "
        "(failed anywhere else), fixed (expected to fail, passed: XPASS), not judged; a pass "
        "judged only through launch (virtual device) is marked. Markdown goes to stdout "
        "unless -o is given; --html writes a self-contained HTML page (then Markdown is written "
        "only if -o is given too).",
    )
    merge.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json", help="--tile-report files")
    merge.add_argument("-o", "--output", type=Path, default=None, metavar="FILE", help="write Markdown here")
    merge.add_argument("--html", type=Path, default=None, metavar="FILE", help="write an HTML page here")
    plugins.hook.pytest_tileconform_add_merge_options(parser=merge)
    merge.set_defaults(handler=functools.partial(_report_merge, plugins))
    compare = actions.add_parser(
        "compare",
        help="compare two results files case by case (hardware vs virtual, or exactly)",
        description="Compare two --tile-report files case by case (cases matched by id; files of "
        "any readable format). Hardware against virtual: a hardware pass, run or numerics verdict "
        "(the launch was accepted) agrees with a virtual pass, other stages must be the same, and "
        "so must smem_requested. Verdicts of the same kind of device are compared exactly on "
        "outcome, failed_stage, judged_through, status, detail, smem_requested, smem_limit, "
        "workspace_bytes and device (kind, name, arch, cc); timings and the rest of 'extra', "
        "'source' and pytest's outcome are not compared, and a case judged in one file only "
        "disagrees. Cases in only one file are listed. The last line is the summary.",
        epilog="Exit status: 0 every case judged in both agrees, 1 some disagree, 2 no case was "
        "judged in both, or a file cannot be read.",
    )
    compare.add_argument("a", type=Path, metavar="A.json", help="a --tile-report file (e.g. hardware)")
    compare.add_argument("b", type=Path, metavar="B.json", help="another (e.g. virtual, or a rerun)")
    compare.set_defaults(handler=_report_compare)
    diff = actions.add_parser(
        "diff",
        help="what changed from a baseline run to a new one; exit 1 on a new regression",
        description="What changed from OLD (a baseline --tile-report) to NEW, case by case (cases "
        "matched as 'report compare' matches them), as Markdown: new regressions, fixes, cases "
        "whose verdict changed stage or status or whose expectation changed, cases newly not "
        "judged, regressions already in OLD, added and removed cases. A case's category is its "
        "verdict against its matrix's expectation in that run: pass, known-bad (failed at its "
        "expected stage), regression (failed anywhere else), fixed (expected to fail, passed) or "
        "not judged.",
        epilog="Exit status: 0 no new regression, 1 NEW has a regression OLD did not have (a case "
        "new in NEW included), 2 a file cannot be read.",
    )
    diff.add_argument("old", type=Path, metavar="OLD.json", help="the baseline --tile-report file")
    diff.add_argument("new", type=Path, metavar="NEW.json", help="the run to judge against it")
    add_output(diff, "the Markdown")
    diff.set_defaults(handler=_report_diff)
    schema = actions.add_parser(
        "schema",
        help="print the JSON Schema of results files",
        description="Print the JSON Schema (draft 2020-12) of the results files this version writes.",
    )
    add_output(schema, "the schema")
    schema.set_defaults(handler=_report_schema)
    apply.add_parser(actions, plugins.kinds())


# -- parser ------------------------------------------------------------------------------------
def build_parser(plugins: Iterable[object] = ()) -> argparse.ArgumentParser:
    """The core's commands (``report``) and every plugin's (:mod:`.plugins`; ``plugins``: more
    plugin objects, as ``pytest.main(plugins=...)`` takes them)."""
    parser = argparse.ArgumentParser(
        prog="tileconform",
        description="Tile matrices that follow FlashInfer, and what the results of "
        "pytest --tile-matrix say across runners.",
        epilog="Exit status: 0 ok, 1 flagged (drift --strict), 2 bad usage or input, "
        "3 a needed tool or FlashInfer is missing or failed.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, action=Commands)
    found = command_plugins(plugins)
    _add_report(subparsers, found)
    cache.add_parser(subparsers)
    found.hook.pytest_tileconform_add_commands(subparsers=subparsers)
    return parser


def _version() -> str:
    """The installed distribution's version: the one pip and the wheel's metadata show."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-tileconform")
    except PackageNotFoundError:
        return "(not installed: no distribution metadata)"


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parse_args``, except that results files may come in several runs between options
    (``drift a.json --strict b.json``): argparse fills a list of positionals from one run only,
    and its intermixed parsing does not work with subcommands."""
    args, extra = parser.parse_known_args(argv)
    files = getattr(args, "results", None)
    if isinstance(files, list):
        files.extend(Path(e) for e in extra if not e.startswith("-"))
        extra = [e for e in extra if e.startswith("-")]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None, plugins: Iterable[object] = ()) -> int:
    parser = build_parser(plugins)
    args = _parse(parser, argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CommandError as exc:
        message(str(exc))
        return exc.status
    except UnusableEnvironment as exc:  # the host's doing (a build cache, a tool): its one line
        message(str(exc))
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        message("interrupted")
        return 130
    except BrokenPipeError:
        quiet_stdout()
        return EXIT_OK
    except OSError as exc:  # what no command anticipated; a message, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        message(f"{where}{exc.strerror or exc}")
        return EXIT_ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
