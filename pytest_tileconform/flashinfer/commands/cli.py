"""The FlashInfer wing's ``tileconform`` commands, added through its plugin's
``pytest_tileconform_add_commands`` (:mod:`...commands.plugins`): gen-matrix, drift, tactics,
export-blocklist, bisect and matrices. Each imports what it needs when it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...archs import arch_name
from ...commands.inputs import load_results
from ...commands.output import EXIT_ENVIRONMENT, EXIT_FLAGGED, EXIT_OK, CommandError, emit, message
from ...dtypes import DTYPES_GRAMMAR
from .inputs import installed_sources, offered

if TYPE_CHECKING:  # the commands import what they need when they run: --help stays fast
    from ...results.model import CaseRecord
    from ..tactics.offered import ConfigKey


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from . import bisect, matrices, tactics

    _add_gen_matrix(subparsers)
    _add_drift(subparsers)
    tactics.add_parser(subparsers)
    _add_export_blocklist(subparsers)
    bisect.add_parser(subparsers).set_defaults(handler=bisect.main)
    matrices.add_parser(subparsers)


def tactic_ids_of(path: Path) -> Callable[[CaseRecord], str]:
    """The ids of a saved probe output that select a results file's case (``G1:#3 G2:#27``;
    "" when none does): what ``report merge --tactics`` writes next to a case."""
    from ..tactics.offered import ProbeError, format_ids, parse, tactic_key
    from .drift import record_key

    try:
        tactics = parse(path.read_text(errors="replace").splitlines())
    except (OSError, ProbeError) as exc:
        raise CommandError(f"--tactics {path}: {exc}") from None
    offered: dict[tuple[str, ConfigKey], list[tuple[int, int]]] = {}
    for t in tactics:
        if t.tma_ws:
            offered.setdefault((arch_name(t.sm), tactic_key(t)), []).append((t.gemm, t.tactic))

    def ids(case: CaseRecord) -> str:
        key = record_key(case, case.arch)
        return "" if key is None else format_ids(offered.get((case.arch, key), []))

    return ids


# -- gen-matrix --------------------------------------------------------------------------------
def _split_list(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _gen_matrix(args: argparse.Namespace) -> int:
    from ..generator import GENERATOR_ARCH, GeneratorError, generator_path, instantiated_configs
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
    from ...commands.options import add_arch, add_output
    from .options import add_flashinfer_sources

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
        help=f"only these dtype combinations ({DTYPES_GRAMMAR}), or every one of an activation "
        "(nvfp4); comma-separated or repeated",
    )
    add_output(gen, "the matrix")
    add_flashinfer_sources(gen)
    gen.add_argument("-v", "--verbose", action="store_true", help="list the operations left out")
    gen.set_defaults(handler=_gen_matrix)


# -- drift -------------------------------------------------------------------------------------
def _drift(args: argparse.Namespace) -> int:
    from ..generator import GENERATOR_ARCH, GeneratorError, generated_ops
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
    from ...commands.options import add_arch, add_output, add_results
    from .options import add_tactics

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
    from ...dtypes import dtype_label, parse_dtypes
    from ...verdict import UNRUN
    from .blocklist import BlocklistError, dumps, export_for, request

    arch = args.arch
    results = load_results(args, required=True)
    try:  # before the probe may be built: the results decide whether there is a list to write
        dtypes = None if args.dtype is None else dtype_label(*parse_dtypes(args.dtype))
        wanted = request(results, arch, dtypes=dtypes, gpu=args.gpu, accept_virtual=args.accept_virtual)
    except BlocklistError as exc:
        raise CommandError(str(exc)) from None
    except ValueError as exc:
        raise CommandError(f"--dtype {exc}") from None
    sources = installed_sources(args.flashinfer_sources) if args.tactics is None else None
    tactics = offered(args, arch, sources)
    if not tactics:
        raise CommandError(f"no tactic for {arch} in {args.tactics or 'the probe output'}")
    export = export_for(tactics, wanted)
    say_left_out(arch, export.unused, [cases for _key, cases in export.not_offered])
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


def say_left_out(
    arch: str, unused: int, not_offered: Sequence[Sequence[str]], tactic: str = "tactic"
) -> None:
    """What an export leaves out of its list: the virtual verdicts not accepted, and the failing
    cases no ``tactic`` stands for (each failing configuration's case ids)."""
    if unused:
        message(f"{unused} virtual-device verdict(s) for {arch} not used (--accept-virtual uses them)")
    for cases in not_offered:
        message(f"failing but offered by no {tactic}, not in the blocklist: {', '.join(cases)}")


def _add_export_blocklist(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ...commands.options import add_arch, add_output, add_results
    from .options import add_tactics

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
        "--dtype", default=None, metavar="DTYPES", help=f"the dtype combination: {DTYPES_GRAMMAR}"
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
