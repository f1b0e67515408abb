"""What a run tells people: the terminal grid and the machine-readable results document."""

from __future__ import annotations

import datetime as dt
import platform
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ..archs import arch_order
from ..dtypes import shape_label
from ..matrix.cases import Case
from ..verdict import UNRUN, Stage, kernel_ran, output_checked
from .model import FORMAT, CaseEntry, Fingerprint, Host, ResultsDocument
from .observation import CaseLookup, Observation

#: pytest outcome -> grid symbol (``u`` as pytest's progress letter for an unrun pass)
SYMBOLS = {
    "passed": ".",
    UNRUN: "u",
    "xfailed": "x",
    "failed": "F",
    "xpassed": "F",
    "skipped": "s",
    "error": "E",
}
LEGEND = (
    f". pass   u {UNRUN}: passed what was judged, the kernel did not run   x known-bad, failed at "
    "its expected stage   F fail   s skipped (not judged)"
)


def _cell(counter: Counter[str]) -> str:
    order = (".", "u", "x", "F", "E", "s")
    return " ".join(f"{counter[sym]}{sym}" for sym in order if counter[sym])


def grid_lines(case_of: CaseLookup, observations: Sequence[Observation]) -> list[str]:
    """Rows arch x dtypes, columns tiles (CTA MxNxK, K in elements), counts of outcomes per cell."""
    cells: dict[tuple[str, str], dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    tiles: set[tuple[int, int, int]] = set()
    for obs in observations:
        case = case_of(obs.matrix, obs.case_id)
        if case is None:
            continue
        tiles.add(case.tile)
        cells[case.arch, case.dtype_label][shape_label(case.tile)][SYMBOLS.get(obs.outcome, "?")] += 1
    if not cells:
        return []
    columns = [shape_label(t) for t in sorted(tiles)]
    rows = sorted(cells, key=lambda r: (arch_order(r[0]), r[1]))
    header = ["arch", "dtypes", *columns]
    table = [[arch, dtypes, *(_cell(cells[arch, dtypes][c]) for c in columns)] for arch, dtypes in rows]
    widths = [max(len(str(r[i])) for r in [header, *table]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), *(fmt.format(*row) for row in table), "", LEGEND]


def source_lines(observations: Sequence[Observation]) -> list[str]:
    """Where the verdicts came from, and what each source could not judge."""
    judged: Counter[tuple[str, str]] = Counter()
    unrun: Counter[tuple[str, str]] = Counter()
    skipped = 0
    for obs in observations:
        if obs.verdict is not None:
            judged[obs.verdict.source, obs.verdict.judged_through.value] += 1
            unrun[obs.verdict.source, obs.verdict.judged_through.value] += obs.verdict.unrun
        elif obs.outcome == "skipped":
            skipped += 1
    lines = []
    for (source, through), count in sorted(judged.items()):
        limit = "" if output_checked(Stage(through)) else f"; stages after {through} were NOT judged"
        if not kernel_ran(Stage(through)):
            limit += f": the kernel did not run, so {unrun[source, through]} pass(es) are reported as {UNRUN}"
        lines.append(f"{count} case(s) judged by {source}, through {through}{limit}")
    if skipped:
        lines.append(f"{skipped} case(s) skipped without a verdict (-rs shows why)")
    return lines


def _kernel_ms(obs: Observation) -> float | None:
    value = obs.verdict.extra.get("kernel_ms") if obs.verdict is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def timing_lines(observations: Sequence[Observation], most: int = 5) -> list[str]:
    """The kernel times hardware verdicts carry (``--tile-timing-iters``), slowest first: every
    case when there are few, else the ``most`` slowest and the ``most`` fastest."""
    timed = [(ms, obs) for obs in observations if (ms := _kernel_ms(obs)) is not None]
    if not timed:
        return []
    timed.sort(key=lambda pair: (-pair[0], pair[1].case_id))
    several = len({obs.matrix for _, obs in timed}) > 1
    shown: list[tuple[float, Observation] | None] = list(timed)
    if len(timed) > 2 * most + 1:
        shown = [*timed[:most], None, *timed[-most:]]
    lines = [
        f"kernel_ms (mean time of one launcher call, CUDA events): {len(timed)} case(s) timed, slowest first"
    ]
    for pair in shown:
        if pair is None:
            lines.append(f"  {'...':>10}  ({len(timed) - 2 * most} more)")
            continue
        ms, obs = pair
        name = f"{obs.matrix.name}::{obs.case_id}" if several else obs.case_id
        lines.append(f"  {ms:>10.4f}  {name}")
    return lines


def results_document(
    case_of: CaseLookup,
    observations: Sequence[Observation],
    *,
    fingerprint: Fingerprint,
    startup_s: float | None = None,
) -> ResultsDocument:
    """The run report (written by :func:`.store.write_results`). ``finished_at_s`` of a case counts
    from the plugin's start in the pytest process; ``startup_s`` is how long after the process's
    own start that was (Python, pytest and plugin imports), so a verdict's time since the command
    started is their sum."""
    cases = []
    for obs in observations:
        case: Case | None = case_of(obs.matrix, obs.case_id)
        entry: dict[str, Any] = {
            "matrix": str(obs.matrix),
            "id": obs.case_id,
            "outcome": obs.outcome,
            "expected": case.expected if case else None,
            "expected_status": case.expectation.status if case and case.expectation else None,
            "case": case.record() if case else None,
            "verdict": obs.verdict.to_json() if obs.verdict else None,
            "duration_s": round(obs.duration, 3),
            "finished_at_s": round(obs.at, 3),
            "worker": obs.worker or None,
            "skip_reason": obs.skip_reason or None,
        }
        cases.append(CaseEntry.model_validate(entry))
    return ResultsDocument(
        format=FORMAT,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        host=Host(node=platform.node(), python=platform.python_version(), fingerprint=fingerprint),
        startup_s=startup_s,
        cases=cases,
    )
