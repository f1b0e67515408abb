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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the commands import what they need when they run: --help stays fast
    from ..flashinfer.tactics.offered import ConfigKey
    from ..results.model import CaseRecord

from .inputs import installed_sources, load_results, offered, read_document
from .output import EXIT_ENVIRONMENT, EXIT_FLAGGED, EXIT_OK, CommandError, emit, message, quiet_stdout


# -- report ------------------------------------------------------------------------------------
def _report_merge(args: argparse.Namespace) -> int:
    from ..results.merge import merge, to_markdown
    from ..results.merge_html import to_html
    from ..results.store import ReportError

    try:
        merged = merge(args.results, tactic_ids_of(args.tactics) if args.tactics else None)
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


def tactic_ids_of(path: Path) -> Callable[[CaseRecord], str]:
    """The ids of a saved probe output that select a results file's case (``G1:#3 G2:#27``;
    "" when none does): what ``report merge --tactics`` writes next to a case."""
    from ..flashinfer.tactics.offered import ProbeError, format_ids, parse, tactic_key
    from .drift import record_key

    try:
        tactics = parse(path.read_text(errors="replace").splitlines())
    except (OSError, ProbeError) as exc:
        raise CommandError(f"--tactics {path}: {exc}") from None
    offered: dict[tuple[str, ConfigKey], list[tuple[int, int]]] = {}
    for t in tactics:
        if t.tma_ws:
            offered.setdefault((f"sm{t.sm}", tactic_key(t)), []).append((t.gemm, t.tactic))
    return lambda case: format_ids(offered.get((case.arch, record_key(case, case.arch)), []))


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


def _add_report(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    merge.add_argument(
        "--tactics",
        type=Path,
        default=None,
        metavar="JSONL",
        help="a tactics probe output (drift/tactics --save-tactics): name FlashInfer's tactic ids "
        "of each listed case's kernel",
    )
    merge.set_defaults(handler=_report_merge)
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
    apply.add_parser(actions)


# -- gen-matrix --------------------------------------------------------------------------------
def _split_list(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _gen_matrix(args: argparse.Namespace) -> int:
    from ..flashinfer.generator import GENERATOR_ARCH, GeneratorError, generator_path, instantiated_configs
    from .genmatrix import GenMatrixError, check_text, matrix_text, select_dtypes

    arch = args.arch
    if arch not in GENERATOR_ARCH:
        raise CommandError(f"--arch {arch}: FlashInfer's generator is read for {', '.join(GENERATOR_ARCH)}")
    sources = installed_sources(args.flashinfer_sources)
    try:
        configs, skipped = instantiated_configs(sources, arch)
        configs = select_dtypes(configs, _split_list(args.dtype))
    except GeneratorError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None
    except GenMatrixError as exc:
        raise CommandError(str(exc)) from None
    for item in skipped:
        if args.verbose:
            message(f"left out: {item.description}: {item.reason}")
    if skipped:
        reasons = sorted({s.reason for s in skipped})
        message(
            f"{len(skipped)} generator operation(s) for {arch} are not built by this harness and are "
            f"left out ({'; '.join(reasons)}); -v lists them"
        )
    command = "tileconform gen-matrix --arch " + arch
    if args.dtype:
        command += " --dtype " + ",".join(_split_list(args.dtype))
    try:
        text = matrix_text(
            configs,
            arch,
            flashinfer_version=sources.version,
            generator=generator_path(sources),
            skipped=skipped,
            command=command,
        )
    except GenMatrixError as exc:
        raise CommandError(str(exc)) from None
    check_text(text, configs, arch, args.output or Path(f"{arch}-generated.yaml"))
    message(f"{len(configs)} configuration(s) of FlashInfer {sources.version} for {arch}")
    emit(text, args.output)
    return EXIT_OK


def _add_gen_matrix(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .options import add_arch, add_flashinfer_sources, add_output

    gen = subparsers.add_parser(
        "gen-matrix",
        help="write a matrix of the configurations the installed FlashInfer instantiates",
        description="Write a tile matrix (format version 1) of exactly the MoE grouped-GEMM "
        "configurations FlashInfer's generator (jit/gemm/cutlass/generate_kernels.py, loaded on "
        "its own, without importing flashinfer) instantiates for an architecture and that this "
        "harness builds. It has no expectations: run it with --tile-update to record them.",
    )
    gen.add_argument(
        "--from-flashinfer",
        action="store_true",
        help="where the configurations come from: FlashInfer's generator, the only source (the default)",
    )
    add_arch(gen)
    gen.add_argument(
        "--dtype",
        action="append",
        default=[],
        metavar="DTYPES",
        help="only these dtype combinations, as case ids spell them (nvfp4-bf16, fp8_e4m3-fp16, "
        "bf16) or by activation (nvfp4); comma-separated or repeated",
    )
    add_output(gen, "the matrix")
    add_flashinfer_sources(gen)
    gen.add_argument("-v", "--verbose", action="store_true", help="list the operations left out")
    gen.set_defaults(handler=_gen_matrix)


# -- drift -------------------------------------------------------------------------------------
def _drift(args: argparse.Namespace) -> int:
    from ..flashinfer.generator import GENERATOR_ARCH, GeneratorError, generated_ops
    from .drift import compare, to_markdown

    arch = args.arch
    if arch not in GENERATOR_ARCH:
        raise CommandError(f"--arch {arch}: FlashInfer's generator is read for {', '.join(GENERATOR_ARCH)}")
    results = load_results(args)
    sources = installed_sources(args.flashinfer_sources)
    tactics = offered(args, arch, sources)
    if not tactics:
        raise CommandError(f"no tactic for {arch} in {args.tactics or 'the probe output'}")
    try:
        generated = generated_ops(sources, arch)
    except GeneratorError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None
    drift = compare(arch, tactics, generated, results)
    header = [
        f"# Drift for {arch}: FlashInfer {sources.version}",
        "",
        "(a) offered: autotuner tactic ids (G1 / G2: GEMM 1 / GEMM 2) from MoeGemmRunner::getConfigs "
        + ("(replayed from " + str(args.tactics) + ")" if args.tactics else "(tactics probe)")
        + "; (b) dispatch: dispatchMoeGemmSelectTileShapeTmaWarpSpecialized; (c) generated: "
        "generate_kernels.py; (d) verdict: "
        + (", ".join(f"`{p.name}`" for p in args.results) if args.results else "no results file given"),
    ]
    emit(to_markdown(drift, flagged_only=args.flagged_only, header=header), args.output)
    flagged = drift.flagged
    message(f"{len(drift.rows)} configuration(s), {len(flagged)} flagged")
    return EXIT_FLAGGED if flagged and args.strict else EXIT_OK


def _add_drift(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .options import add_arch, add_output, add_results, add_tactics

    drift = subparsers.add_parser(
        "drift",
        help="compare FlashInfer's offered tactics, its dispatch, its generator and observed verdicts",
        description="One table per configuration: (a) offered by FlashInfer's runtime heuristic as an "
        "autotuner tactic, (b) accepted by its TMA warp-specialized dispatch, both obtained by "
        "compiling and running FlashInfer's own host code (a probe built once into the build cache, "
        "no GPU needed), (c) instantiated by its generator, (d) the verdicts of the results files. "
        "Offered but not instantiated, rejected by the dispatch, or always failing is flagged.",
    )
    add_arch(drift)
    add_results(drift, required=False)
    drift.add_argument("--strict", action="store_true", help="exit with status 1 if anything is flagged")
    drift.add_argument("--flagged-only", action="store_true", help="list only the flagged configurations")
    add_output(drift, "the table")
    add_tactics(drift)
    drift.set_defaults(handler=_drift)


# -- export-blocklist ----------------------------------------------------------------------------
def _export_blocklist(args: argparse.Namespace) -> int:
    from ..verdict import UNRUN
    from .blocklist import BlocklistError, dumps, export_for, request

    arch = args.arch
    results = load_results(args, required=True)
    try:  # before the probe may be built: the results decide whether there is a list to write
        wanted = request(results, arch, dtypes=args.dtype, gpu=args.gpu, accept_virtual=args.accept_virtual)
    except BlocklistError as exc:
        raise CommandError(str(exc)) from None
    sources = installed_sources(args.flashinfer_sources) if args.tactics is None else None
    tactics = offered(args, arch, sources)
    if not tactics:
        raise CommandError(f"no tactic for {arch} in {args.tactics or 'the probe output'}")
    export = export_for(tactics, wanted)
    if export.unused:
        message(f"{export.unused} virtual-device verdict(s) for {arch} not used (--accept-virtual uses them)")
    for _key, cases in export.not_offered:
        message(f"failing but offered by no tactic, not in the blocklist: {', '.join(cases)}")
    if export.unrun:
        tactics_unrun = sum(len(u.tactics) for u in export.unrun)
        message(
            f"{len(export.unrun)} configuration(s) ({tactics_unrun} tactic(s)) passed only without "
            f"their kernel running ({UNRUN}): not blocked, and NOT known to work on {wanted.gpu}; "
            "listed under _metadata.tileconform.unrun. Run them on that GPU"
        )
    total = sum(len(v) for v in export.document["invalid_tactics"].values())
    message(f"{total} invalid tactic(s) from {len(export.blocked)} failing configuration(s)")
    emit(dumps(export.document), args.output)
    return EXIT_OK


def _add_export_blocklist(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .options import add_arch, add_output, add_results, add_tactics

    export = subparsers.add_parser(
        "export-blocklist",
        help="write failing configurations as a FlashInfer tactics blocklist",
        description="Write the configurations that failed in the results files as the JSON tactics "
        "blocklist FlashInfer's autotuner loads from FLASHINFER_TACTICS_BLOCKLIST (the format of "
        "'flashinfer generate-tactics-blocklist'), for the GPU of their hardware verdicts. Tactic "
        "ids come from FlashInfer's own tactic list (tactics probe, or --tactics). One file "
        "covers one dtype combination and one GPU. Virtual-device verdicts are used only with "
        "--accept-virtual; build verdicts (compile errors) always.",
        epilog="Exit status: 0 written, 2 bad input, or nothing to write a list from: results "
        "from no GPU without --accept-virtual, several GPUs, several dtype combinations without "
        "--dtype.",
    )
    add_arch(export)
    add_results(export, required=True)
    export.add_argument(
        "--dtype", default=None, metavar="DTYPES", help="dtype combination, as case ids spell it (nvfp4-bf16)"
    )
    export.add_argument(
        "--gpu",
        default=None,
        metavar="NAME",
        help="the GPU the list is for, as torch.cuda.get_device_name() prints it (FlashInfer "
        "compares it): the one of the hardware verdicts (the default), or, with "
        "--accept-virtual and no hardware verdict, needed ('*': every GPU)",
    )
    export.add_argument(
        "--accept-virtual",
        action="store_true",
        help="also block what failed on the virtual device, whose verdicts go through launch at "
        "most and were seen on no GPU; without hardware verdicts, --gpu then names the GPU",
    )
    add_output(export, "the blocklist")
    add_tactics(export)
    export.set_defaults(handler=_export_blocklist)


# -- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tileconform",
        description="Tile matrices that follow FlashInfer, and what the results of "
        "pytest --tile-matrix say across runners.",
        epilog="Exit status: 0 ok, 1 flagged (drift --strict), 2 bad usage or input, "
        "3 a needed tool or FlashInfer is missing or failed.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _COMMANDS:
        add(subparsers)
    return parser


def _version() -> str:
    """The installed distribution's version: the one pip and the wheel's metadata show."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-tileconform")
    except PackageNotFoundError:
        return "(not installed: no distribution metadata)"


def _add_bisect(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from . import bisect

    bisect.add_parser(subparsers).set_defaults(handler=bisect.main)


def _add_matrices(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from . import matrices

    matrices.add_parser(subparsers)


def _add_tactics(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from . import tactics

    tactics.add_parser(subparsers)


_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    _add_gen_matrix,
    _add_drift,
    _add_tactics,
    _add_report,
    _add_export_blocklist,
    _add_bisect,
    _add_matrices,
]


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
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
        quiet_stdout()
        return EXIT_OK
    except OSError as exc:  # what no command anticipated; a message, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        message(f"{where}{exc.strerror or exc}")
        return EXIT_ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
