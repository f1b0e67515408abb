"""The dense backend's part of ``tileconform tactics``, ``drift`` and ``export-blocklist``, added
through its plugin's ``pytest_tileconform_add_commands`` after the MoE backend's
(:class:`...commands.plugins.Commands` hands a command added already back to join): ``--dense``
routes a command line here, any other goes to the handler the command had. Without the MoE
plugin the commands are this backend's alone and take the options it would have added."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...commands.output import (
    EXIT_ENVIRONMENT,
    EXIT_FLAGGED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    emit,
    message,
)
from ...dtypes import DTYPES_GRAMMAR

if TYPE_CHECKING:
    from ...flashinfer.sources import FlashInferSources
    from ..runners import Runner
    from .tables import Row

Handler = Callable[[argparse.Namespace], int]
DENSE = (
    "FlashInfer's dense CUTLASS GEMMs (mm_fp4, mm_mxfp8, fp8 and bf16 GEMM runners, read from the "
    "installed package's generator, runners and gemm_base.py: no probe, no nvcc)"
)


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _join(
        subparsers,
        "tactics",
        _tactics,
        "FlashInfer's tactic ids -> configuration and verdict (--dense: its dense GEMM runners)",
    )
    _join(
        subparsers,
        "drift",
        _drift,
        "offered tactics against what is generated and judged (--dense: dense GEMMs)",
    )
    _join(
        subparsers,
        "export-blocklist",
        _export_blocklist,
        "write failing configurations as a FlashInfer tactics blocklist (--dense: dense GEMMs)",
    )


def _has(parser: argparse.ArgumentParser, flag: str) -> bool:
    return any(flag in action.option_strings for action in parser._actions)


def _join(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, handler: Handler, text: str
) -> None:
    from ...commands.options import add_arch, add_output, add_results
    from ...flashinfer.commands.options import add_flashinfer_sources

    parser = subparsers.add_parser(name, help=text, description=text)
    previous: Handler | None = parser.get_default("handler")
    group = parser.add_argument_group("dense GEMMs")
    group.add_argument("--dense", action="store_true", help=DENSE)
    if not _has(parser, "--arch"):
        add_arch(parser)
        add_results(parser, required=name == "export-blocklist")
        add_output(parser, "the output")
    if not _has(parser, "--flashinfer-sources"):
        add_flashinfer_sources(parser)
    if not _has(parser, "--dtype"):
        group.add_argument(
            "--dtype", default=None, metavar="DTYPES", help=f"only these dtypes ({DTYPES_GRAMMAR})"
        )
    if not _has(parser, "--matrix"):
        group.add_argument(
            "--matrix",
            action="append",
            default=[],
            metavar="NAME|PATH",
            help="--dense: take expectations from this matrix (repeatable; default: every shipped matrix)",
        )
    extra = {
        "drift": [
            ("--strict", "exit with status 1 if anything is flagged"),
            ("--flagged-only", "list only flagged rows"),
        ],
        "tactics": [("--json", "write JSON rows instead of Markdown")],
        "export-blocklist": [("--accept-virtual", "also block what failed on the virtual device")],
    }
    for flag, words in extra[name]:
        if not _has(parser, flag):
            group.add_argument(flag, action="store_true", help=words)
    if name == "export-blocklist" and not _has(parser, "--gpu"):
        group.add_argument("--gpu", default=None, metavar="NAME", help="the GPU the list is for")
    parser.set_defaults(handler=functools.partial(_route, handler, previous))


def _route(dense: Handler, previous: Handler | None, args: argparse.Namespace) -> int:
    if args.dense or previous is None:
        return dense(args)
    return previous(args)


# -- inputs ----------------------------------------------------------------------------------------
def _sources(args: argparse.Namespace) -> FlashInferSources:
    """The sources the MoE command's options name (without its plugin: ``--flashinfer-sources``
    or the installed package)."""
    from ...flashinfer.commands.inputs import chosen_sources

    release, cache_dir = getattr(args, "flashinfer", None), getattr(args, "cache_dir", None)
    return chosen_sources(release, args.flashinfer_sources, cache_dir)


def _runners(args: argparse.Namespace, sources: FlashInferSources, dtype: str | None) -> list[Runner]:
    """The dense runners ``args.arch`` tunes, those of ``dtype`` (``--dtype``) if given."""
    from ...dtypes import label_dtypes, select_combinations
    from ..offered import DenseSourcesError, read_offered
    from ..runners import runners

    try:
        found, untuned = runners(read_offered(sources), args.arch, sources.root.parent)
    except DenseSourcesError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None
    for family in untuned:
        message(
            f"note: {family.module} is loaded on {args.arch} but tuned by no TunableRunner: no autotuner ids"
        )
    if dtype is None:
        return found
    labels = [label for r in found for label in r.labels()]
    try:
        chosen = select_combinations(dtype, [label_dtypes(label) for label in labels])
    except ValueError as exc:
        raise CommandError(f"--dtype {exc}") from None
    if not chosen:
        raise CommandError(
            f"--dtype {dtype}: FlashInfer has no dense CUTLASS runner of it on {args.arch}; choose "
            f"from {', '.join(labels) or 'none'}"
        )
    return [r for r in found if any(label_dtypes(label) in chosen for label in r.labels())]


def _none_here(arch: str, sources: FlashInferSources) -> str:
    return (
        f"FlashInfer {sources.version} has no dense CUTLASS runner with a tactic list for {arch} "
        "(a module of its generator whose supported majors take it)"
    )


def _rows(args: argparse.Namespace, runners: list[Runner], observed: bool) -> list[Row]:
    from ...commands.inputs import load_results
    from ...flashinfer.commands.tactics import matrix_texts
    from .tables import rows_of
    from .verdicts import expected_verdicts, observed_verdicts

    results = load_results(args)
    expected = expected_verdicts(args.arch, matrix_texts(args.matrix))
    seen = observed_verdicts(results, args.arch) if results or observed else None
    rows = rows_of(runners, expected, seen)
    if args.dtype is not None:
        from ...dtypes import label_dtypes, select_combinations

        chosen = select_combinations(args.dtype, [label_dtypes(r.dtypes) for r in rows])
        rows = [r for r in rows if label_dtypes(r.dtypes) in chosen]
    return rows


# -- the commands ----------------------------------------------------------------------------------
def _tactics(args: argparse.Namespace) -> int:
    from .tables import to_markdown

    sources = _sources(args)
    runners = _runners(args, sources, args.dtype)
    if not runners:
        message(_none_here(args.arch, sources))
    rows = _rows(args, runners, observed=False)
    if getattr(args, "explain", None) is not None:
        rows = _explained(args.explain, runners, rows, sources)
    if args.json:
        emit(json.dumps([r.as_dict() for r in rows], indent=1), args.output)
        return EXIT_OK
    header = [
        f"# FlashInfer's dense CUTLASS tactics for {args.arch} (FlashInfer {sources.version})",
        "",
        "Ids as FlashInfer's autotuner, config cache and blocklist write them: an index into the "
        "runner's getConfigs(), the same list for every output type. Expected: the "
        f"{'given' if args.matrix else 'shipped'} matrices' expectation (a case without one is expected "
        "to pass; 'unjudged': no matrix names it); "
        + ("observed: " + ", ".join(f"`{p.name}`" for p in args.results) + "; " if args.results else "")
        + "virtual verdicts go through launch only.",
    ]
    emit(to_markdown(rows, header, with_observed=bool(args.results)), args.output)
    message(f"{len(rows)} dense tactic(s) x output type for {args.arch}")
    return EXIT_OK


def _explained(text: str, runners: list[Runner], rows: list[Row], sources: FlashInferSources) -> list[Row]:
    """The rows whose ids the pasted autotuner lines name (:mod:`.explain`)."""
    from ...flashinfer.tactics.autotuner_lines import MAX_TEXT
    from .explain import ExplainError, default_id, mentions, resolve

    if text == "-":
        text = sys.stdin.read(MAX_TEXT + 1)
    try:
        said = mentions(text, {r.runner_class for r in runners})
    except ExplainError as exc:
        raise CommandError(f"--explain: {exc}") from None
    wanted: set[tuple[str, int]] = set()
    for mention in said:
        mine = [r for r in runners if mention.runner_class in (None, r.runner_class)]
        for runner in mine:
            ids, problems = resolve(mention, runner, default_id(sources.csrc, runner))
            wanted.update((runner.family.module, i) for i in ids)
            for problem in problems:
                message(f"line {mention.line}: {problem}")
    chosen = [r for r in rows if (r.runner.family.module, r.tactic.index) in wanted]
    if not chosen:
        raise CommandError("none of the pasted ids is a tactic of the chosen runners", EXIT_USAGE)
    return chosen


def _drift(args: argparse.Namespace) -> int:
    from .tables import drift_summary, to_markdown

    sources = _sources(args)
    runners = _runners(args, sources, args.dtype)
    rows = _rows(args, runners, observed=True)
    flagged = [r for r in rows if r.flags]
    header = [
        f"# Dense drift for {args.arch}: FlashInfer {sources.version}",
        "",
        "Offered: each runner's getConfigs() (index = autotuner id); generated: the CTA shapes "
        "jit/gemm/core.py renders; expected: the "
        f"{'given' if args.matrix else 'shipped'} matrices; observed: "
        + (", ".join(f"`{p.name}`" for p in args.results) if args.results else "no results file given"),
    ]
    if not runners:
        header += ["", _none_here(args.arch, sources) + "."]
    shown = flagged if args.flagged_only else rows
    emit(
        to_markdown(shown, header, with_observed=True, drift=True)
        + "\n"
        + drift_summary(args.arch, rows)
        + "\n",
        args.output,
    )
    message(f"{len(rows)} dense tactic(s) x output type, {len(flagged)} flagged")
    return EXIT_FLAGGED if flagged and args.strict else EXIT_OK


def _export_blocklist(args: argparse.Namespace) -> int:
    from ...commands.inputs import load_results
    from ...dtypes import dtype_label, parse_dtypes
    from ...flashinfer.commands.blocklist import BlocklistError, dumps
    from ...flashinfer.commands.cli import say_left_out
    from .blocklist import export

    results = load_results(args, required=True)
    try:
        dtypes = None if args.dtype is None else dtype_label(*parse_dtypes(args.dtype))
    except ValueError as exc:
        raise CommandError(f"--dtype {exc}") from None
    sources = _sources(args)
    runners = _runners(args, sources, None)  # every runner: the failures choose
    try:
        made = export(
            results, args.arch, runners, dtypes=dtypes, gpu=args.gpu, accept_virtual=args.accept_virtual
        )
    except BlocklistError as exc:
        raise CommandError(str(exc)) from None
    say_left_out(args.arch, made.unused, made.not_offered, "dense tactic")
    if made.unrun:
        message(
            f"{made.unrun} configuration(s) passed only without their kernel running: not blocked, and NOT "
            "known to work on that GPU; listed under _metadata.tileconform.unrun"
        )
    total = sum(len(v) for v in made.document["invalid_tactics"].values())
    message(f"{total} invalid tactic id(s) from {made.blocked} failing dense configuration(s)")
    emit(dumps(made.document), args.output)
    return EXIT_OK
