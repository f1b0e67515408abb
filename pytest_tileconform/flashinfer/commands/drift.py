"""``tileconform drift --arch ARCH``: do FlashInfer's heuristic, dispatch and generator agree, and
do the tactics it offers work?

Per configuration (dtypes, CTA tile in elements, cluster, swap_ab, epilogue fusion and, on SM100,
the epilogue schedule variant with a dynamic cluster's runtime shape) one row says:

(a) offered   the autotuner's tactic ids for it (``G1:#3`` = GEMM 1 tactic 3), from FlashInfer's
              ``MoeGemmRunner::getConfigs`` / ``get_candidate_configs`` run by the tactics probe;
(b) dispatch  whether ``dispatchMoeGemmSelectTileShapeTmaWarpSpecialized`` selects a launcher for
              it (``accepted``) or throws (``rejected: <message>``), also from the probe;
(c) generated whether ``generate_kernels.py`` instantiates it;
(d) verdict   what the plugin observed in the ``--results`` files (``pass``, ``unrun`` for a pass
              whose kernel did not run, as on a virtual device, or the failing stage, with
              counts), ``not judged`` if no results file has it.

Flagged: offered but not instantiated, offered but rejected by the dispatch, offered and every
observed verdict failing, and, when results files are given, offered and instantiated but judged
by none of them. Instantiated but never offered is shown as information (dead code, not a
failure).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from ...commands.judged import keyed
from ...commands.output import CommandError
from ...results.model import CaseRecord, ResultsDocument
from ...verdict import UNRUN
from ..axes import RecordError, recorded_axes
from ..configs import dynamic_clusters
from ..generator import GeneratedOp, is_dynamic
from ..tactics.offered import ConfigKey as ConfigKey  # export-blocklist imports it from here
from ..tactics.offered import Shape, Tactic, case_key, format_ids, with_fused_activation
from ..tactics.offered import tactic_key as tactic_key  # likewise

FLAG_NOT_INSTANTIATED = "offered, not instantiated"
FLAG_REJECTED = "offered, dispatch rejects"
FLAG_ALWAYS_FAILS = "offered, always fails"
FLAG_NEVER_JUDGED = "offered, never judged"
INFO_NOT_OFFERED = "instantiated, never offered"


@dataclass
class Row:
    key: ConfigKey
    offered: list[tuple[int, int]] = field(default_factory=list)  # (gemm, tactic id)
    dispatch: set[str] = field(default_factory=set)  # "accepted" or "rejected: ..."
    generated: bool = False
    verdicts: Counter[str] = field(default_factory=Counter)
    #: results files were given: an offered kernel none of them judged is flagged
    results_given: bool = False

    @property
    def flags(self) -> list[str]:
        flags = []
        if self.offered:
            if not self.generated:
                flags.append(FLAG_NOT_INSTANTIATED)
            rejected = any(d.startswith("rejected") for d in self.dispatch)
            if rejected:
                flags.append(FLAG_REJECTED)
            if self.verdicts and not (self.verdicts["pass"] or self.verdicts[UNRUN]):
                flags.append(FLAG_ALWAYS_FAILS)
            if self.results_given and self.generated and not rejected and not self.verdicts:
                flags.append(FLAG_NEVER_JUDGED)
        return flags

    @property
    def info(self) -> list[str]:
        return [INFO_NOT_OFFERED] if self.generated and not self.offered else []


@dataclass
class Drift:
    arch: str
    rows: list[Row]
    non_tma: Counter[str]  # runner -> tactics that are not TMA warp-specialized (SM80-style)

    @property
    def flagged(self) -> list[Row]:
        return [r for r in self.rows if r.flags]


def record_key(case: CaseRecord, arch: str) -> ConfigKey | None:
    """The configuration a results file's case stands for (shared with ``tactics`` and
    ``export-blocklist``); None for another backend's case (keys this backend does not have)."""
    from ...matrix.schema import DTypes

    dtypes = DTypes(act=case.act, weight=case.weight, out=case.out).label
    try:
        axes = recorded_axes(case.coordinates())
    except RecordError as exc:
        if exc.foreign:
            return None
        raise CommandError(f"a case record of {arch} that is not FlashInfer's: {exc}") from None
    m, n, k = (int(v) for v in case.tile.split("x"))
    return case_key(
        arch,
        dtypes,
        (m, n, k),
        axes["cluster"],
        axes["swap_ab"],
        axes["fusion"],
        axes["epilogue"],
        axes["dynamic_cluster"],
        axes["mainloop"],
        axes["kernel_arch"],
    )


def generated_keys(op: GeneratedOp) -> list[ConfigKey]:
    """The configurations a generator operation can be picked as: a dynamic-CGA kernel once per
    runtime cluster FlashInfer's heuristic pairs it with."""
    base = ConfigKey(op.dtypes, op.tile, op.cluster, op.swap_ab, op.fusion, op.variant)
    if not is_dynamic(op.variant):
        return [base]
    return [replace(base, dynamic=d) for d in dynamic_clusters(op.cluster)]


def compare(
    arch: str,
    tactics: Iterable[Tactic],
    generated: Iterable[GeneratedOp],
    results: Sequence[ResultsDocument] = (),
) -> Drift:
    """Join the four lists. ``results`` are --tile-report documents (``results.store``). A
    GEMM 1 tactic also offers its tile's activation-fusion kernel, which a ClampedRelu2 MoE runs
    (:func:`~..tactics.offered.with_fused_activation`)."""
    rows: dict[ConfigKey, Row] = {}
    tactics = list(tactics)
    fused = [t for t in with_fused_activation(tactics) if t.fusion == "activation"]

    def row(key: ConfigKey) -> Row:
        return rows.setdefault(key, Row(key, results_given=bool(results)))

    non_tma: Counter[str] = Counter()
    for t in tactics:
        if not t.tma_ws:
            non_tma[t.runner] += 1
    for t in [t for t in tactics if t.tma_ws] + fused:
        r = row(tactic_key(t))
        r.offered.append((t.gemm, t.tactic))
        r.dispatch.add(f"rejected: {t.error}" if t.dispatch == "rejected" else t.dispatch)
    for op in generated:
        for key in generated_keys(op):
            row(key).generated = True
    for _document, _entry, verdict, judged in keyed(results, arch, lambda case: record_key(case, arch)):
        row(judged).verdicts[verdict.reported] += 1
    return Drift(arch, sorted(rows.values(), key=lambda r: _order(r.key)), non_tma)


def _order(key: ConfigKey) -> tuple[str, Shape, Shape, bool, str, str, Shape]:
    """Rows in key order; a fixed cluster (no runtime one) before the dynamic ones."""
    return (key.dtypes, key.tile, key.cluster, key.swap_ab, key.fusion, key.variant, key.dynamic or (0, 0, 0))


def _shape(shape: Shape) -> str:
    return "x".join(map(str, shape))


def _offered(row: Row) -> str:
    return format_ids(row.offered) or "-"


def _verdicts(row: Row) -> str:
    if not row.verdicts:
        return "not judged"
    order = sorted(row.verdicts, key=lambda o: (o != "pass", o != UNRUN, o))
    return ", ".join(f"{o} x{row.verdicts[o]}" for o in order)


def to_markdown(drift: Drift, *, flagged_only: bool = False, header: Sequence[str] = ()) -> str:
    rows = drift.flagged if flagged_only else drift.rows
    with_variant = any(r.key.variant for r in drift.rows)
    columns = ["dtypes", "tile (K in elements)", "cluster", "swap_ab", "fusion"]
    columns += ["epilogue"] if with_variant else []
    columns += ["(a) offered", "(b) dispatch", "(c) generated", "(d) verdict", "flags"]
    lines = [*header, "", "| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for r in rows:
        cells = [
            r.key.dtypes,
            _shape(r.key.tile),
            _shape(r.key.cluster),
            str(r.key.swap_ab).lower(),
            r.key.fusion,
        ]
        cells += [r.key.schedule or "-"] if with_variant else []
        dispatch = "; ".join(sorted(r.dispatch)) or "-"
        notes = [f"**{f}**" for f in r.flags] + r.info
        cells += [_offered(r), dispatch, "yes" if r.generated else "no", _verdicts(r), ", ".join(notes)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    counts = Counter(f for r in drift.rows for f in r.flags)
    summary = ", ".join(f"{n} {f}" for f, n in sorted(counts.items())) or "nothing flagged"
    info = sum(1 for r in drift.rows if r.info)
    lines.append(
        f"{len(drift.rows)} configuration(s) for {drift.arch}: {summary}; {info} {INFO_NOT_OFFERED}."
    )
    if drift.non_tma:
        listing = ", ".join(f"{runner}: {n}" for runner, n in sorted(drift.non_tma.items()))
        lines.append(
            "Also offered, not TMA warp-specialized (SM80-style grouped GEMM, another launcher; "
            f"not compared): {listing}."
        )
    return "\n".join(lines) + "\n"
