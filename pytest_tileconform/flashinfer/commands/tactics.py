"""``tileconform tactics --arch ARCH --dtype D``: FlashInfer's own tactic ids, named and judged.

FlashInfer's autotuner for ``cutlass_fused_moe`` (``MoERunner``) speaks of tactics as integers:
``["MoERunner", 17]`` in its config cache, ``... MoERunner object at 0x...> 17`` in its logs,
``[3, 11]`` in a tactics blocklist. This command lists, for one architecture and dtype combination,
every id in FlashInfer's own order (the tactics probe runs the binding's ``getTactics``: see
:mod:`pytest_tileconform.flashinfer.tactics.offered` for how ids are numbered) with the configuration it
selects (CTA tile, cluster, dynamic CGA, mainloop / epilogue schedule, fusion, swap_ab, whether the
dispatch takes it) and this project's verdict for it:

expected  what the shipped matrices expect of that configuration (``pass`` or the stage it is
          known to fail at, with the expectation's recorded source, e.g. ``virtual (sm120
          profile)``); a matrix case without an expectation is expected to pass;
observed  the verdicts of the results files given (``pass``, ``unrun (through launch)`` for a
          pass whose kernel did not run, or the stage) with the device kind: ``hardware <GPU>``,
          ``virtual <arch>`` (host-side stages only) or ``build``;
          ``not judged`` when neither has the configuration.

``--explain TEXT`` reads ids out of a pasted autotuner line (:mod:`..tactics.autotuner_lines`)
and prints the same for those ids only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...archs import arch_name, arch_number
from ...commands.judged import counted, expected_word, matrix_cases, observed_words
from ...commands.output import EXIT_ENVIRONMENT, EXIT_OK, EXIT_USAGE, CommandError, emit, message
from ...dtypes import DTYPES_GRAMMAR, label_dtypes, shape_label
from ..tactics.offered import (
    NO_ACTIVATION_KERNEL,
    ConfigKey,
    Tactic,
    case_key,
    fuses_activation,
    runner_tactics,
    tactic_key,
    with_fused_activation,
    without_fused_finalize,
)
from .drift import record_key

if TYPE_CHECKING:
    from ...results.model import ResultsDocument
    from ..sources import FlashInferSources
    from ..tactics.autotuner_lines import Mention

NOT_JUDGED = "not judged"
NOT_TMA = "not judged (SM80-style grouped GEMM, another launcher: not built by this harness)"
#: A tactic FlashInfer's own dispatch refuses (the probe ran it): no kernel, for any problem
REJECTED = "fails: FlashInfer's dispatch selects no kernel for it (tactics probe)"
#: A GEMM 1 tactic a ClampedRelu2 MoE cannot run (the binding checks before any dispatch)
REFUSED_ACTIVATION = "fails: FlashInfer's binding refuses it under ClampedRelu2 (its autotuner skips it)"
Verdicts = dict[ConfigKey, Counter[str]]


# -- verdicts ------------------------------------------------------------------------------------
def matrix_texts(chosen: Sequence[str]) -> list[tuple[str, str]]:
    """(name, YAML text) of the matrices whose expectations are shown: ``chosen`` names shipped
    ones (as ``tileconform matrices`` lists them) or paths; none chosen: every shipped matrix."""
    from .matrices import SUFFIX, find, shipped_folder

    if not chosen:
        files = sorted(
            (f for f in shipped_folder().iterdir() if f.name.endswith(SUFFIX)), key=lambda f: f.name
        )
        return [(f.name.removesuffix(SUFFIX), f.read_text(encoding="utf-8")) for f in files]
    texts = []
    for name in chosen:
        path = Path(name)
        if path.suffix in (".yaml", ".yml") and path.exists():
            from ...matrix.load import MatrixInvalid, read_text

            try:
                texts.append((str(path), read_text(path)))
            except MatrixInvalid as exc:
                raise CommandError(str(exc)) from None
        else:
            texts.append((name.removesuffix(SUFFIX), find(name).file.read_text(encoding="utf-8")))
    return texts


def expected_verdicts(arch: str, matrices: Sequence[tuple[str, str]]) -> Verdicts:
    """What ``matrices`` expect of each configuration of ``arch``: ``outcome [matrix]`` or, for a
    known-bad case, ``stage [matrix, source]`` (a case without an expectation is expected to
    pass), counted over the matrices' cases (problems)."""
    from .. import NAME
    from ..axes import moe_cases

    found: Verdicts = {}
    # the shipped matrices are not all MoE's: only this backend's cases count
    for name, case in matrix_cases(matrices):
        if case.backend != NAME or case.arch != arch:
            continue
        (moe,) = moe_cases([case])
        key = case_key(
            arch,
            moe.dtype_label,
            moe.tile,
            moe.axes.cluster,
            moe.axes.swap_ab,
            moe.axes.fusion,
            moe.axes.epilogue,
            moe.axes.dynamic_cluster,
            moe.axes.mainloop,
            moe.axes.kernel_arch,
        )
        found.setdefault(key, Counter())[expected_word(moe, name)] += 1
    return found


def observed_verdicts(results: Sequence[ResultsDocument], arch: str) -> Verdicts:
    """The verdicts of ``arch`` in results files, as ``outcome [device]`` counts per configuration."""
    return observed_words(results, arch, lambda case: record_key(case, arch))


# -- rows ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One tactic id, what it selects and what is known of it."""

    tactic: Tactic
    key: ConfigKey | None  # None: not a TMA warp-specialized tactic
    expected: str
    observed: str | None  # None: no results file given

    def as_dict(self) -> dict[str, Any]:
        t = self.tactic
        tile = t.tile_elements() if t.tma_ws else None
        return {
            "arch": arch_name(t.sm),
            "runner": t.runner,
            "gemm": t.gemm,
            "tactic": t.tactic,
            "tma_ws": t.tma_ws,
            "tile": shape_label(tile) if tile else None,
            "tile_bytes": shape_label(t.tile_bytes) if t.tile_bytes else None,
            "sm80_tile_config": None if t.tma_ws else t.tile_enum,
            "cluster": shape_label(t.cluster) if t.cluster else None,
            "dynamic_cluster": shape_label(t.dynamic_cluster) if t.dynamic_cluster else None,
            "fallback_cluster": shape_label(t.fallback_cluster) if t.fallback_cluster else None,
            "mainloop_schedule": t.mainloop or None,
            "epilogue_schedule": t.epilogue or None,
            "fusion": t.fusion if t.tma_ws else None,
            "swap_ab": t.swap_ab if t.tma_ws else None,
            "dispatch": t.dispatch,
            "kernel_arch": arch_name(t.kernel_arch) if t.kernel_arch else None,
            "dispatch_error": t.error or None,
            "expected": self.expected,
            "observed": self.observed,
        }


def rows_of(tactics: Sequence[Tactic], expected: Verdicts, observed: Verdicts | None) -> list[Row]:
    rows = []
    for t in tactics:
        if not t.tma_ws:
            rows.append(Row(t, None, NOT_TMA, None if observed is None else NOT_TMA))
            continue
        key = tactic_key(t)
        if t.dispatch != "accepted":
            why = REFUSED_ACTIVATION if t.error == NO_ACTIVATION_KERNEL else REJECTED
            rows.append(Row(t, key, why, None if observed is None else why))
            continue
        seen = None if observed is None else counted(observed.get(key), NOT_JUDGED)
        rows.append(Row(t, key, counted(expected.get(key), NOT_JUDGED), seen))
    return rows


def select_runners(tactics: Iterable[Tactic], wanted: str) -> list[str]:
    """The runners (dtype labels) ``wanted`` names (:func:`...dtypes.select_combinations`: a combination,
    or an activation for every output type); an unknown one is a :class:`CommandError` listing
    the choices."""
    from ...dtypes import dtype_label, select_combinations

    runners = sorted({t.runner for t in tactics})
    try:
        selected = select_combinations(wanted, [label_dtypes(r) for r in runners])
    except ValueError as exc:
        raise CommandError(f"--dtype {exc}") from None
    chosen = [dtype_label(*combo) for combo in selected]
    if not chosen:
        raise CommandError(
            f"--dtype {wanted}: FlashInfer has no MoE runner of it here; choose from {', '.join(runners)}"
        )
    return chosen


# -- output --------------------------------------------------------------------------------------
def _shape(shape: tuple[int, int, int] | None) -> str:
    return shape_label(shape) if shape else "-"


def _cells(row: Row, with_observed: bool) -> list[str]:
    t = row.tactic
    if t.tma_ws:
        dynamic = "-"
        if t.dynamic_cluster:
            dynamic = f"{_shape(t.dynamic_cluster)} (fallback {_shape(t.fallback_cluster)})"
        dispatch = f"rejected: {t.error}" if t.dispatch == "rejected" else t.dispatch
        if t.kernel_arch:
            dispatch += f" (SM{t.kernel_arch}'s kernel)"
        cells = [
            f"{_shape(t.tile_elements())} ({_shape(t.tile_bytes)}B)",
            _shape(t.cluster),
            dynamic,
            f"{t.mainloop or '-'} / {t.epilogue or '-'}",
            t.fusion,
            str(t.swap_ab).lower(),
            dispatch,
        ]
    else:
        cells = [f"SM80-style (CutlassTileConfig {t.tile_enum})", "-", "-", "-", "-", "-", "not TMA WS"]
    cells = [str(t.tactic), str(t.gemm), *cells, row.expected]
    if with_observed:
        cells.append(row.observed or NOT_JUDGED)
    return [c.replace("|", "\\|") for c in cells]


COLUMNS = [
    "tactic",
    "GEMM",
    "tile, K in elements (FlashInfer's, K in bytes)",
    "cluster",
    "dynamic CGA",
    "mainloop / epilogue",
    "fusion",
    "swap_ab",
    "dispatch",
    "expected (matrices)",
]


def to_markdown(sections: Sequence[tuple[str, list[Row]]], with_observed: bool, header: Sequence[str]) -> str:
    columns = [*COLUMNS, *(["observed (results)"] if with_observed else [])]
    lines = list(header)
    for title, rows in sections:
        lines += ["", f"## {title}", ""]
        lines += ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
        lines += ["| " + " | ".join(_cells(r, with_observed)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _ranges(tactics: Sequence[Tactic]) -> str:
    parts = []
    for gemm in (1, 2):
        ids = [t.tactic for t in tactics if t.gemm == gemm]
        parts.append(f"GEMM {gemm}: {ids[0]}-{ids[-1]}" if ids else f"GEMM {gemm}: none")
    return ", ".join(parts)


def resolve(mention: Mention, tactics: Sequence[Tactic]) -> tuple[list[tuple[int, Tactic]], list[str]]:
    """The tactics of one runner (id order) that ``mention``'s ids name, and why any does not.
    ``-1`` is FlashInfer's default: the first tactic of the GEMM (setRunnerProfiles), under a
    fused ClampedRelu2 GEMM 1's first with an activation-fusion kernel
    (``defaultActivationFusionProfile``)."""
    found, problems = [], []
    for wanted in mention.ids:
        if wanted == -1:
            gemms = [mention.gemm] if mention.gemm else [1, 2]
            for gemm in gemms:
                mine = [t for t in tactics if t.gemm == gemm]
                first = next((t for t in mine if t.fusion == "activation"), mine[0] if mine else None)
                if first is not None:
                    found.append((wanted, first))
            continue
        if not 0 <= wanted < len(tactics):
            problems.append(f"{wanted} is not an id of this runner ({_ranges(tactics)})")
            continue
        t = tactics[wanted]
        if mention.gemm is not None and t.gemm != mention.gemm:
            problems.append(
                f"{wanted} is a GEMM {t.gemm} id, but the line names gemm{mention.gemm} "
                f"({_ranges(tactics)}): is it another runner's (dtype) or FlashInfer version's id?"
            )
            continue
        found.append((wanted, t))
    return found, problems


# -- the command ---------------------------------------------------------------------------------
def _sources(args: argparse.Namespace) -> FlashInferSources | None:
    """FlashInfer's sources: a release (--flashinfer), a folder, the installed package; None
    when a saved probe output is replayed and nothing else needs them."""
    from .inputs import chosen_sources

    if args.flashinfer is None and args.tactics is not None:
        return None
    return chosen_sources(args.flashinfer, args.flashinfer_sources, args.cache_dir)


def _explained(
    said: Sequence[Mention], listed: Sequence[Tactic], rows: Sequence[Row]
) -> tuple[str, list[Row], list[str]]:
    """The rows of one runner that the pasted lines name, a title saying which ids they are
    (``-1`` resolved), and why any id is none of this runner's."""
    picked: list[tuple[int, Row]] = []
    problems = []
    for mention in said:
        found, wrong = resolve(mention, listed)
        picked += [(wanted, rows[t.tactic]) for wanted, t in found]
        problems += [f"line {mention.line}: {w}" for w in wrong]
    title = ", ".join(
        f"{m} = GEMM {r.tactic.gemm} #{r.tactic.tactic}" if m == -1 else str(m) for m, r in picked
    )
    return title, [r for _, r in picked], problems


def _explain_text(value: str) -> str:
    if value != "-":
        return value
    from ..tactics.autotuner_lines import MAX_TEXT

    return sys.stdin.read(MAX_TEXT + 1)


def main(args: argparse.Namespace) -> int:
    from ...commands.inputs import load_results
    from ..tactics.autotuner_lines import LineError, mentions
    from ..tactics.offered import ProbeError
    from .inputs import offered

    arch = args.arch
    said = None
    if args.explain is not None:  # before the probe may be built: bad text fails fast
        try:
            said = mentions(_explain_text(args.explain))
        except LineError as exc:
            raise CommandError(f"--explain: {exc}") from None
        for mention in said:
            if mention.fused_finalize is not None and mention.fused_finalize != args.fused_finalize:
                flag = "without --no-fused-finalize" if mention.fused_finalize else "--no-fused-finalize"
                message(
                    f"warning: line {mention.line} was tuned with use_fused_finalize="
                    f"{mention.fused_finalize}: its GEMM 2 ids are numbered as {flag} numbers them"
                )
    results = load_results(args)
    sources = _sources(args)
    everything = offered(args, arch, sources)
    if not everything:
        raise CommandError(f"no tactic for {arch} in {args.tactics or 'the probe output'}")
    runners = select_runners(everything, args.dtype)
    expected = expected_verdicts(arch, matrix_texts(args.matrix))
    observed = observed_verdicts(results, arch) if results else None
    origin = (
        f"replayed from {args.tactics}"
        if args.tactics
        else f"FlashInfer {sources.version if sources else ''}"
    )
    sections = []
    problems = []
    for runner in runners:
        try:
            listed = runner_tactics(everything, arch_number(arch), runner)
        except ProbeError as exc:
            raise CommandError(f"{args.tactics or 'tactics probe'}: {exc}", EXIT_ENVIRONMENT) from None
        if not args.fused_finalize:
            listed = without_fused_finalize(listed)
        if args.clamped_relu2:
            if fuses_activation(arch_number(arch), runner):
                listed = with_fused_activation(listed)
            else:
                message(
                    f"note: {arch} {runner} does not fuse ClampedRelu2 into GEMM 1 (FlashInfer fuses it "
                    "for bf16 and MXFP8 on SM100-SM109): its ids select what they select without it"
                )
        rows = rows_of(listed, expected, observed)
        if said is not None:
            title, chosen, wrong = _explained(said, listed, rows)
            title = f"{arch} {runner}: {title}"
            problems += [f"{runner}, {w}" for w in wrong]
        else:
            chosen = [r for r in rows if args.gemm is None or r.tactic.gemm == args.gemm]
            title = f"{arch} {runner}" + ("" if args.gemm is None else f", GEMM {args.gemm}")
        if chosen:
            sections.append((f"{title} ({_ranges(listed)})", chosen))
    for problem in problems:
        message(problem)
    if said is not None and not sections:
        raise CommandError("none of the pasted ids is a tactic of " + ", ".join(runners), EXIT_USAGE)
    if args.json:
        emit(json.dumps([r.as_dict() for _, rows in sections for r in rows], indent=1), args.output)
    else:
        finalize = "use_fused_finalize=False"
        if args.fused_finalize:
            finalize = "use_fused_finalize=True, FlashInfer's default"
        if args.clamped_relu2:
            finalize += "; activation_type=ClampedRelu2: GEMM 1 runs the activation-fusion kernels"
        header = [
            f"# FlashInfer's MoERunner tactics for {arch} ({origin})",
            "",
            "Ids as FlashInfer's autotuner, config cache and blocklist write them: one list per dtype "
            f"combination, GEMM 1's ids first, GEMM 2's after them ({finalize}). "
            f"Expected: the {'given' if args.matrix else 'shipped'} matrices' expectation "
            "(a case without one is expected to pass); "
            + ("observed: " + ", ".join(f"`{p.name}`" for p in args.results) + "; " if args.results else "")
            + "virtual verdicts go through launch only.",
        ]
        emit(to_markdown(sections, observed is not None, header), args.output)
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ...commands.options import add_arch, add_output, add_results
    from .options import add_tactics

    parser = subparsers.add_parser(
        "tactics",
        help="FlashInfer's MoE tactic ids -> tile, cluster, schedule, fusion, swap_ab and verdict",
        description="List FlashInfer's cutlass_fused_moe tactics (MoERunner ids, as its autotuner "
        "logs, config cache and tactics blocklist write them) for one architecture and dtype "
        "combination, in FlashInfer's own order (its getTactics, run by the tactics probe: "
        "compiled once, no GPU needed), with the configuration each selects and this project's "
        "verdict: what the shipped matrices expect and what the results files observed.",
        epilog="Exit status: 0 listed, 2 bad usage or input (an id that is no tactic of the "
        "runner), 3 FlashInfer or nvcc missing or failing.",
    )
    add_arch(parser)
    parser.add_argument(
        "--dtype",
        required=True,
        metavar="DTYPES",
        help=f"the runner's dtypes ({DTYPES_GRAMMAR}), or an activation (nvfp4: every output type)",
    )
    parser.add_argument("--gemm", type=int, choices=(1, 2), default=None, help="only this GEMM's ids")
    parser.add_argument(
        "--explain",
        default=None,
        metavar="TEXT",
        help="only the ids a pasted autotuner line names (a config-cache entry, a log line, a "
        "blocklist entry or a bare id; '-' reads it from stdin)",
    )
    parser.add_argument(
        "--flashinfer",
        default=None,
        metavar="VERSION|WHEEL|DIR",
        help="ask this FlashInfer release instead of the installed one (fetched as "
        "--tile-flashinfer fetches it)",
    )
    parser.add_argument(
        "--matrix",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="take expectations from this matrix (a shipped one's name or a YAML file; repeatable; "
        "default: every shipped matrix)",
    )
    parser.add_argument(
        "--no-fused-finalize",
        dest="fused_finalize",
        action="store_false",
        help="number GEMM 2's ids as a cutlass_fused_moe call with use_fused_finalize=False does "
        "(GEMM 2 then offers GEMM 1's list, without the finalize epilogue)",
    )
    parser.add_argument(
        "--clamped-relu2",
        action="store_true",
        help="select GEMM 1's kernels as a ClampedRelu2 MoE (activation_type=ClampedRelu2, with "
        "a clamp limit) does on SM100-SM109 for bf16 and MXFP8: each id runs its tile's "
        "activation-fusion kernel, or is refused without one; -1 is the first that has one",
    )
    add_results(parser, required=False)
    parser.add_argument("--json", action="store_true", help="write JSON rows instead of Markdown")
    add_output(parser, "the table")
    add_tactics(parser)
    parser.set_defaults(handler=main)
