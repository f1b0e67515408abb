"""``tileconform report merge``: several ``--tile-report`` files -> one compatibility table.

Rows are keyed by a device fingerprint (:class:`~pytest_tileconform.results.fingerprint.DeviceKey`):
GPU name or virtual profile, compute capability, opt-in shared memory, driver and CUDA versions,
the columns the backends add (:class:`~.fingerprint.HostColumn`: their versions, their
compiler). There is one table per architecture and dtype combination; its columns are the CTA
tiles (M x N x K, K in elements) and each cell aggregates the cases of that tile (whatever the
backend's axes) by :class:`~.category.Category`: the verdict against what the matrix expected,
so a known-bad tile reads differently from a regression and a strict XPASS (pytest failed the
run) is not shown as a pass. Counts, the stage, the launcher's
status and the shared memory asked for against the device's limit go with each category. A pass
whose kernel did not run (a virtual device judges through ``launch``) is ``unrun``, never a pass;
a pass or fix judged short of the output check is marked.

Shards and reruns merge: a case judged twice on the same fingerprint counts once; if the two
disagree (verdict, shared memory or category) the cell says so (``conflict``) and a warning
names both files.

The Markdown is here; :mod:`.merge_html` renders the same :class:`Merged` as a page.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..archs import arch_order
from ..dtypes import dtype_label as _dtype_label
from ..matrix.expect import describe_expected
from ..verdict import EXPECTATIONS, UNRUN, Stage, kernel_ran
from .category import MEANING, Category, category_of, partly_judged
from .fingerprint import DeviceKey, HostColumn, device_key
from .model import CaseRecord, ResultsDocument
from .store import read_results

if TYPE_CHECKING:
    from pydantic import BaseModel

#: verdict outcomes in stage order, ``pass`` first
OUTCOME_ORDER = {name: i for i, name in enumerate(EXPECTATIONS)}
#: the order of a cell's parts: the expected results first, then what needs a look
CELL_ORDER = (
    Category.PASS,
    Category.UNRUN,
    Category.KNOWN_BAD,
    Category.FIXED,
    Category.REGRESSION,
    Category.NOT_JUDGED,
)
#: categories whose cases pass every stage judged: a cell of only these shows its shared memory
PASSING = frozenset({Category.PASS, Category.UNRUN})
#: categories a reader must not miss: bold in Markdown, strong colours in HTML
LOUD = frozenset({Category.REGRESSION, Category.FIXED})
#: a pass or fix judged only through this stage carries this mark (any other stage short of
#: numerics: §); an unrun pass says so in its own category instead
MARKS = {Stage.LAUNCH.value: "†", Stage.COMPILE.value: "‡"}
OTHER_MARK = "§"


@dataclass(frozen=True)
class Judged:
    """One case's verdict as one results file recorded it, with its category."""

    key: DeviceKey
    arch: str
    dtypes: str
    tile: str
    case_id: str
    coordinates: str  # the backend's, as JSON: what tells two cases of one id apart
    outcome: str  # the verdict: pass or the stage it was rejected at
    expected: str  # the matrix's: pass or a stage ("?" when the file does not say)
    expected_status: str | None  # the status the expectation records (None: any)
    category: Category
    through: str | None  # a pass that holds only through this stage (category.partly_judged)
    status: str
    smem_requested: int | None
    smem_limit: int | None
    judged_through: str
    file: Path
    note: str = ""  # the case's text in the note column (:class:`CaseNote`)


@dataclass(frozen=True)
class CaseNote:
    """A column a plugin adds to the notable cases (a backend's ids of each case's
    kernel, e.g. tactic ids): its title, a case's text given its coordinates, and
    the text of a case it has nothing for."""

    title: str
    of: Callable[[CaseRecord], str]
    missing: str = ""


@dataclass
class Cell:
    """The verdicts of one (device, arch, dtypes, tile)."""

    judged: dict[tuple[str, str], Judged] = field(default_factory=dict)
    conflicts: list[tuple[Judged, Judged]] = field(default_factory=list)

    def add(self, item: Judged) -> None:
        slot = (item.case_id, item.coordinates)
        known = self.judged.get(slot)
        if known is not None and _agreement(known) != _agreement(item):
            self.conflicts.append((known, item))
        self.judged[slot] = item

    @property
    def counts(self) -> Counter[Category]:
        return Counter(j.category for j in self.judged.values())

    @property
    def all_pass(self) -> bool:
        """Every case passed what was judged (pass or unrun), with no conflict."""
        return not self.conflicts and all(j.category in PASSING for j in self.judged.values())

    def worst(self) -> Category:
        """The category a reader must see first (the cell's colour)."""
        return min(self.counts, key=lambda c: c.order)

    def notable(self) -> list[Judged]:
        """Every case that did not pass what was judged, by id (unrun passes are counted in their
        cells: a virtual device's whole matrix would fill the list)."""
        return sorted((j for j in self.judged.values() if j.category not in PASSING), key=lambda j: j.case_id)


def _agreement(item: Judged) -> tuple[str, int | None, Category]:
    return (item.outcome, item.smem_requested, item.category)


@dataclass
class Merged:
    files: list[Path]
    devices: dict[DeviceKey, int]  # verdicts per device row
    cells: dict[tuple[str, str], dict[DeviceKey, dict[str, Cell]]]  # (arch, dtypes) -> row -> tile
    unplaced: Counter[str]  # cases in no table, by why: pytest's outcome of those without a verdict
    warnings: list[str]
    note: CaseNote | None = None  # a column a plugin adds to the notable cases
    columns: tuple[HostColumn, ...] = ()  # the columns the backends add to the device rows

    def row_ids(self) -> dict[DeviceKey, str]:
        return {key: f"D{i}" for i, key in enumerate(sorted(self.devices), start=1)}

    @property
    def skipped(self) -> int:
        """How many cases are in no table."""
        return sum(self.unplaced.values())

    def totals(self) -> Counter[Category]:
        """Cases per category over every table."""
        total: Counter[Category] = Counter()
        for rows in self.cells.values():
            for tiles in rows.values():
                for cell in tiles.values():
                    total.update(cell.counts)
        return total


def _tile_key(tile: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in tile.split("x"))
    except ValueError:
        return (1 << 30,)


def judged_cases(
    path: Path,
    document: ResultsDocument,
    note: CaseNote | None = None,
    columns: Sequence[HostColumn] = (),
    records: Sequence[type[BaseModel]] = (),
) -> tuple[list[Judged], Counter[str]]:
    """The verdicts of one results file, and the cases that cannot be placed in a table (no
    verdict, hence no device; or no coordinates), counted by pytest's outcome. A case is told
    from another of its id by its backend's coordinates as the backends' ``records`` read them."""
    found: list[Judged] = []
    unplaced: Counter[str] = Counter()
    for entry in document.cases:
        verdict, case = entry.verdict, entry.case
        if verdict is None or case is None:
            unplaced["no longer in its matrix" if case is None else entry.outcome or "not recorded"] += 1
            continue
        found.append(
            Judged(
                key=device_key(verdict, document.host, columns),
                arch=case.arch,
                dtypes=_dtype_label(case.act, case.weight, case.out),
                tile=case.tile,
                case_id=entry.id,
                coordinates=json.dumps(case.coordinates(records), sort_keys=True),
                outcome=verdict.reported,  # a pass whose kernel did not run reads unrun
                expected=entry.expected or "?",
                expected_status=entry.expected_status,
                category=category_of(entry),
                through=partly_judged(entry),
                status=verdict.status,
                smem_requested=verdict.smem_requested,
                smem_limit=verdict.smem_limit,
                judged_through=verdict.judged_through.value,
                file=path,
                note=note.of(case) if note is not None else "",
            )
        )
    return found, unplaced


def merge(
    paths: Sequence[Path],
    note: CaseNote | None = None,
    columns: Sequence[HostColumn] = (),
    records: Sequence[type[BaseModel]] = (),
) -> Merged:
    """Read every results file (all errors, as ``store.ReportError``, are raised before anything
    is merged); with ``note``, each case carries its text in that column; ``columns`` are the
    backends' columns of the device rows; ``records`` the backends' records of their coordinates
    (the ``record`` of a :class:`..matrix.kinds.CaseKind`)."""
    documents = [(path, read_results(path)) for path in paths]
    cells: dict[tuple[str, str], dict[DeviceKey, dict[str, Cell]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(Cell))
    )
    merged = Merged(list(paths), Counter(), cells, Counter(), [], note=note, columns=tuple(columns))
    for path, document in documents:
        items, unplaced = judged_cases(path, document, note, columns, records)
        merged.unplaced.update(unplaced)
        for item in items:
            cell = merged.cells[item.arch, item.dtypes][item.key][item.tile]
            before = len(cell.conflicts)
            cell.add(item)
            if len(cell.conflicts) > before:
                old, new = cell.conflicts[-1]
                merged.warnings.append(
                    f"conflict: {item.case_id} on {item.key.device}: {old.outcome} ({old.category.value}, "
                    f"smem {old.smem_requested}) in {old.file}, {new.outcome} ({new.category.value}, "
                    f"smem {new.smem_requested}) in {new.file}; the table shows the latter"
                )
    for row_cells in merged.cells.values():
        for key, tiles in row_cells.items():
            merged.devices[key] += sum(len(c.judged) for c in tiles.values())
    return merged


# -- the text of a cell --------------------------------------------------------------------------
def number(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _smem_summary(items: Iterable[Judged]) -> str:
    asked = [j.smem_requested for j in items if j.smem_requested is not None]
    if not asked:
        return ""
    low, high = min(asked), max(asked)
    return f"{number(low)} B" if low == high else f"{number(low)}-{number(high)} B"


def mark(stage: str | None) -> str:
    """The mark of a pass that holds only through ``stage`` ('' for a full judgment)."""
    return "" if stage is None else MARKS.get(stage, OTHER_MARK)


def _marks(items: Iterable[Judged]) -> str:
    return "".join(sorted({mark(j.through) for j in items if j.category is not Category.UNRUN}))


def _rejection_detail(items: Sequence[Judged]) -> list[str]:
    """Statuses and the largest shared memory asked for, against its limit."""
    detail = sorted({j.status for j in items if j.status})
    smem = sorted({(j.smem_requested, j.smem_limit) for j in items if j.smem_requested is not None})
    if smem:
        asked, limit = smem[-1]
        over = f" > {number(limit)}" if limit is not None and asked is not None and asked > limit else ""
        detail.append(f"{number(asked)} B{over}")
    return detail


@dataclass(frozen=True)
class Part:
    """One fact of a cell: a head (``known-bad 1/4``) and its details (stage, status, smem)."""

    category: Category | None  # None: not a count (a shared-memory range, a conflict)
    head: str
    details: tuple[str, ...] = ()

    def text(self, *, loud: bool = False) -> str:
        head = f"**{self.head}**" if loud and self.category in LOUD else self.head
        return f"{head} ({', '.join(self.details)})" if self.details else head


def _groups(items: Iterable[Judged], key: str) -> dict[tuple[str, ...], list[Judged]]:
    found: dict[tuple[str, ...], list[Judged]] = defaultdict(list)
    for j in items:
        found[tuple(getattr(j, name) for name in key.split())].append(j)
    return dict(sorted(found.items(), key=lambda kv: [OUTCOME_ORDER.get(v, 99) for v in kv[0]]))


def _unjudged_reason(item: Judged) -> tuple[str, ...]:
    """Why a case with a verdict was not judged against its expectation."""
    expected = item.expected
    if expected in OUTCOME_ORDER and OUTCOME_ORDER[expected] > OUTCOME_ORDER[item.judged_through]:
        return (f"expected {expected}", f"judged through {item.judged_through}")
    return ("skipped",)


def cell_parts(cell: Cell) -> list[Part]:
    """What a cell says, category by category (:data:`CELL_ORDER`)."""
    total = len(cell.judged)
    by_category: dict[Category, list[Judged]] = defaultdict(list)
    for j in cell.judged.values():
        by_category[j.category].append(j)
    parts: list[Part] = []
    for category in CELL_ORDER:
        items = by_category.get(category, [])
        if not items:
            continue
        name = category.value
        if category is Category.PASS:
            parts.append(Part(category, f"{name} {len(items)}/{total}{_marks(items)}"))
        elif category is Category.UNRUN:
            for (through,), group in _groups(items, "judged_through").items():
                parts.append(Part(category, f"{name} {len(group)}/{total}", (f"through {through}",)))
        elif category is Category.KNOWN_BAD:
            for (stage,), group in _groups(items, "outcome").items():
                head = f"{name} {len(group)}/{total}"
                parts.append(Part(category, head, (stage, *_rejection_detail(group))))
        elif category is Category.REGRESSION:
            for (stage, expected, expected_status), group in _groups(
                items, "outcome expected expected_status"
            ).items():
                head = f"{name} {len(group)}/{total}"
                wanted = describe_expected(expected, expected_status or None)
                details = (stage, f"expected {wanted}", *_rejection_detail(group))
                parts.append(Part(category, head, details))
        elif category is Category.FIXED:
            for (expected,), group in _groups(items, "expected").items():
                head = f"{name} {len(group)}/{total}{_marks(group)}"
                parts.append(Part(category, head, (f"expected {expected}", "passed")))
        else:
            reasons: dict[tuple[str, ...], int] = Counter(_unjudged_reason(j) for j in items)
            for why, count in sorted(reasons.items()):
                parts.append(Part(category, f"{name} {count}/{total}", why))
    if cell.all_pass:
        asked_range = _smem_summary(cell.judged.values())
        if asked_range:
            parts.append(Part(None, asked_range))
    if cell.conflicts:
        parts.append(Part(None, f"conflict x{len(cell.conflicts)}"))
    return parts


def cell_text(cell: Cell) -> str:
    """``pass 3/4† · known-bad 1/4 (initialize, Error Internal, 102,400 B > 101,376)``;
    regressions and fixes in bold."""
    return " · ".join(part.text(loud=True) for part in cell_parts(cell))


def used_marks(cells: Iterable[Cell]) -> dict[str, set[str]]:
    """Mark -> the stages it stands for, over these cells."""
    found: dict[str, set[str]] = defaultdict(set)
    for cell in cells:
        for j in cell.judged.values():
            if j.through is not None and j.category is not Category.UNRUN:
                found[mark(j.through)].add(j.through)
    return dict(sorted(found.items()))


def mark_meaning(stages: set[str]) -> str:
    """What a mark says: ``judged through launch only (virtual device): the kernel did not run``."""
    ordered = sorted(stages, key=lambda s: Stage(s).order)
    device = " (virtual device)" if stages == {Stage.LAUNCH.value} else ""
    missed = "D was not checked" if kernel_ran(Stage(ordered[-1])) else "the kernel did not run"
    return f"judged through {', '.join(ordered)} only{device}: {missed}"


def legend_items(cells: Iterable[Cell]) -> list[tuple[Category | None, str, str]]:
    """(category, term, meaning) of a table's legend: every category, then the marks it uses."""
    items: list[tuple[Category | None, str, str]] = [(c, c.value, MEANING[c]) for c in CELL_ORDER]
    for symbol, stages in used_marks(cells).items():
        items.append((None, symbol, mark_meaning(stages)))
    return items


def summary_text(merged: Merged) -> str:
    """``468 verdict(s): 464 pass, 4 regression``."""
    totals = merged.totals()
    counts = ", ".join(f"{totals[c]} {c.value}" for c in CELL_ORDER if totals[c])
    text = f"{sum(merged.devices.values())} verdict(s)" + (f": {counts}" if counts else "")
    if merged.unplaced:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(merged.unplaced.items()))
        text += f"; {merged.skipped} case(s) without a verdict are not in the tables ({why})"
    return text


# -- Markdown ------------------------------------------------------------------------------------
def sections(merged: Merged) -> list[tuple[str, str]]:
    return sorted(merged.cells, key=lambda s: (arch_order(s[0]), s[1]))


def tiles_of(rows: dict[DeviceKey, dict[str, Cell]]) -> list[str]:
    return sorted({tile for tiles in rows.values() for tile in tiles}, key=_tile_key)


def device_columns(key: DeviceKey) -> list[str]:
    cols = [key.device, key.kind, key.cc, key.smem_optin, key.driver, key.cuda, *key.backend]
    cols[3] = f"{int(cols[3]):,}" if cols[3].isdigit() else cols[3]
    return cols


def device_header(merged: Merged) -> list[str]:
    titles = [column.title for column in merged.columns]
    return ["row", "device", "kind", "CC", "opt-in smem (B)", "driver", "CUDA", *titles]


NOTABLE_HEADER = ["row", "case", "category", "expected", "verdict", "status", "smem asked (B)", "limit (B)"]


def notable_header(merged: Merged) -> list[str]:
    return [*NOTABLE_HEADER, merged.note.title] if merged.note else NOTABLE_HEADER


NOTABLE_TITLE = f"Cases other than pass and {UNRUN}"
VIRTUAL_NOTE = (
    "Virtual-device rows judge the host-side stages only: a case that gets through them is "
    f"`{UNRUN}` (the launch was accepted; the kernel did not run and D was not checked), never "
    "`pass`. `?`: the results file does not record it."
)


def md(text: str) -> str:
    """A table cell's text, with Markdown's table syntax escaped."""
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(md(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return lines


def _md_legend(cells: Iterable[Cell]) -> str:
    parts = []
    for category, term, meaning in legend_items(cells):
        shown = f"**{term}**" if category in LOUD else term
        parts.append(f"{shown}: {meaning}")
    return "Legend: " + " · ".join(parts) + "."


def to_markdown(merged: Merged) -> str:
    ids = merged.row_ids()
    lines = [
        "# Tile conformance: merged compatibility table",
        "",
        f"Merged from {len(merged.files)} results file(s): "
        + ", ".join(f"`{p.name}`" for p in merged.files)
        + f". {summary_text(merged)}.",
        "",
        "## Devices",
        "",
    ]
    lines += md_table(
        device_header(merged), [[ids[key], *device_columns(key)] for key in sorted(merged.devices)]
    )
    lines += ["", VIRTUAL_NOTE, ""]
    for arch, dtypes in sections(merged):
        rows = merged.cells[arch, dtypes]
        tiles = tiles_of(rows)
        lines += [f"## {arch} · {dtypes}", "", "Columns: CTA tile M x N x K, K in elements.", ""]
        table = [
            [f"{ids[key]} {key.device}", *(cell_text(rows[key][t]) if t in rows[key] else "-" for t in tiles)]
            for key in sorted(rows)
        ]
        lines += md_table(["device", *tiles], table)
        lines += ["", _md_legend(c for tiles in rows.values() for c in tiles.values()), ""]
    notable = notable_rows(merged)
    if notable:
        lines += [f"## {NOTABLE_TITLE}", ""]
        lines += md_table(notable_header(merged), [[r[0], f"`{r[1]}`", *r[2:]] for r in notable])
        lines.append("")
    return "\n".join(lines)


def notable_rows(merged: Merged) -> list[list[str]]:
    """Every case that is not a plain pass, regressions first (:class:`Category` order)."""
    ids = merged.row_ids()
    found = [
        (section_index, j)
        for section_index, (arch, dtypes) in enumerate(sections(merged))
        for key, tiles in sorted(merged.cells[arch, dtypes].items())
        for cell in tiles.values()
        for j in cell.notable()
    ]
    found.sort(key=lambda item: (item[1].category.order, item[0], item[1].key, item[1].case_id))
    return [
        [
            ids[j.key],
            j.case_id,
            j.category.value + mark(j.through),
            describe_expected(j.expected, j.expected_status),
            j.outcome,
            j.status,
            number(j.smem_requested),
            number(j.smem_limit),
            *([j.note or merged.note.missing] if merged.note else []),
        ]
        for _, j in found
    ]
