"""``tileconform report merge``: several ``--tile-report`` files -> one compatibility table.

Rows are keyed by a device fingerprint (:class:`~pytest_tileconform.results.fingerprint.DeviceKey`):
GPU name or virtual profile, compute capability, opt-in shared memory, driver and CUDA versions,
FlashInfer version and nvcc version. There is one table per architecture and dtype combination;
its columns are the CTA tiles (M x N x K, K in elements) and each cell aggregates the cases of
that tile (clusters, swap_ab, fusion, problems): how many passed, the stage the others were
rejected at, and the shared memory they asked for against the device's limit.

Shards and reruns merge: a case judged twice on the same fingerprint counts once; if the two
verdicts differ the cell says so (``conflict``) and a warning names both files.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..dtypes import dtype_label as _dtype_label
from ..verdict import EXPECTATIONS
from .fingerprint import DeviceKey, device_key
from .model import ResultsDocument
from .store import read_results

#: verdict outcomes in stage order, ``pass`` first
OUTCOME_ORDER = {name: i for i, name in enumerate(EXPECTATIONS)}


@dataclass(frozen=True)
class Judged:
    """One case's verdict as one results file recorded it."""

    key: DeviceKey
    arch: str
    dtypes: str
    tile: str
    case_id: str
    problem: str
    outcome: str  # pass or the stage it was rejected at
    status: str
    smem_requested: int | None
    smem_limit: int | None
    judged_through: str
    file: Path


@dataclass
class Cell:
    """The verdicts of one (device, arch, dtypes, tile)."""

    judged: dict[tuple[str, str], Judged] = field(default_factory=dict)
    conflicts: list[tuple[Judged, Judged]] = field(default_factory=list)

    def add(self, item: Judged) -> None:
        slot = (item.case_id, item.problem)
        known = self.judged.get(slot)
        if known is not None and (known.outcome, known.smem_requested) != (item.outcome, item.smem_requested):
            self.conflicts.append((known, item))
        self.judged[slot] = item

    @property
    def counts(self) -> Counter[str]:
        return Counter(j.outcome for j in self.judged.values())

    @property
    def all_pass(self) -> bool:
        return not self.conflicts and all(j.outcome == "pass" for j in self.judged.values())

    @property
    def none_pass(self) -> bool:
        return all(j.outcome != "pass" for j in self.judged.values())

    def failures(self) -> list[Judged]:
        return sorted((j for j in self.judged.values() if j.outcome != "pass"), key=lambda j: j.case_id)


@dataclass
class Merged:
    files: list[Path]
    devices: dict[DeviceKey, int]  # verdicts per device row
    cells: dict[tuple[str, str], dict[DeviceKey, dict[str, Cell]]]  # (arch, dtypes) -> row -> tile
    skipped: int  # cases without a verdict (skipped, not judged)
    warnings: list[str]

    def row_ids(self) -> dict[DeviceKey, str]:
        return {key: f"D{i}" for i, key in enumerate(sorted(self.devices), start=1)}


def _tile_key(tile: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in tile.split("x"))
    except ValueError:
        return (1 << 30,)


def _arch_key(arch: str) -> tuple[int, str]:
    digits = arch[2:]
    return (int(digits) if digits.isdigit() else 1 << 30, arch)


def judged_cases(path: Path, document: ResultsDocument) -> tuple[list[Judged], int]:
    """The verdicts of one results file, and how many cases had none."""
    found, skipped = [], 0
    for entry in document.cases:
        verdict, case = entry.verdict, entry.case
        if verdict is None or case is None:
            skipped += 1
            continue
        problem = case.problem.model_dump() if case.problem is not None else {}
        found.append(
            Judged(
                key=device_key(verdict, document.host),
                arch=case.arch,
                dtypes=_dtype_label(case.act, case.weight, case.out),
                tile=case.tile,
                case_id=entry.id,
                problem=json.dumps(problem, sort_keys=True),
                outcome=verdict.outcome,
                status=verdict.status,
                smem_requested=verdict.smem_requested,
                smem_limit=verdict.smem_limit,
                judged_through=verdict.judged_through.value,
                file=path,
            )
        )
    return found, skipped


def merge(paths: Sequence[Path]) -> Merged:
    """Read every results file (all errors, as ``store.ReportError``, are raised before anything
    is merged)."""
    documents = [(path, read_results(path)) for path in paths]
    cells: dict[tuple[str, str], dict[DeviceKey, dict[str, Cell]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(Cell))
    )
    merged = Merged(list(paths), Counter(), cells, 0, [])
    for path, document in documents:
        items, skipped = judged_cases(path, document)
        merged.skipped += skipped
        for item in items:
            cell = merged.cells[item.arch, item.dtypes][item.key][item.tile]
            before = len(cell.conflicts)
            cell.add(item)
            if len(cell.conflicts) > before:
                old, new = cell.conflicts[-1]
                merged.warnings.append(
                    f"conflict: {item.case_id} on {item.key.device}: {old.outcome} (smem "
                    f"{old.smem_requested}) in {old.file}, {new.outcome} (smem {new.smem_requested}) "
                    f"in {new.file}; the table shows the latter"
                )
    for row_cells in merged.cells.values():
        for key, tiles in row_cells.items():
            merged.devices[key] += sum(len(c.judged) for c in tiles.values())
    return merged


def _number(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _smem_summary(items: Iterable[Judged]) -> str:
    asked = [j.smem_requested for j in items if j.smem_requested is not None]
    if not asked:
        return ""
    low, high = min(asked), max(asked)
    return f"{_number(low)} B" if low == high else f"{_number(low)}-{_number(high)} B"


def cell_text(cell: Cell) -> str:
    """``pass 4/4 · 215,040 B`` or ``pass 2/4 · initialize 2/4 (Error Internal, 102,400 B > 101,376)``."""
    return " · ".join(cell_parts(cell))


def cell_parts(cell: Cell) -> list[str]:
    """The parts of :func:`cell_text`."""
    total = len(cell.judged)
    counts = cell.counts
    parts = [f"pass {counts['pass']}/{total}"] if counts["pass"] else []
    for outcome in sorted((o for o in counts if o != "pass"), key=lambda o: OUTCOME_ORDER[o]):
        failing = [j for j in cell.judged.values() if j.outcome == outcome]
        statuses = sorted({j.status for j in failing if j.status})
        smem = sorted({(j.smem_requested, j.smem_limit) for j in failing if j.smem_requested is not None})
        detail = list(statuses)
        if smem:
            asked, limit = smem[-1]
            over = f" > {_number(limit)}" if limit is not None and asked is not None and asked > limit else ""
            detail.append(f"{_number(asked)} B{over}")
        extra = f" ({', '.join(detail)})" if detail else ""
        parts.append(f"{outcome} {counts[outcome]}/{total}{extra}")
    if cell.all_pass:
        asked_range = _smem_summary(cell.judged.values())
        if asked_range:
            parts.append(asked_range)
    if cell.conflicts:
        parts.append(f"conflict x{len(cell.conflicts)}")
    return parts


def _sections(merged: Merged) -> list[tuple[str, str]]:
    return sorted(merged.cells, key=lambda s: (_arch_key(s[0]), s[1]))


def _tiles(rows: dict[DeviceKey, dict[str, Cell]]) -> list[str]:
    return sorted({tile for tiles in rows.values() for tile in tiles}, key=_tile_key)


def _device_columns(key: DeviceKey) -> list[str]:
    return [key.device, key.kind, key.cc, key.smem_optin, key.driver, key.cuda, key.flashinfer, key.nvcc]


DEVICE_HEADER = ["row", "device", "kind", "CC", "opt-in smem (B)", "driver", "CUDA", "FlashInfer", "nvcc"]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in header) + " |"]
    lines.append("| " + " | ".join("---" for _ in header) + " |")
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def _smem_label(value: str) -> str:
    return f"{int(value):,}" if value.isdigit() else value


def to_markdown(merged: Merged) -> str:
    ids = merged.row_ids()
    lines = [
        "# Tile conformance: merged compatibility table",
        "",
        f"Merged from {len(merged.files)} results file(s): "
        + ", ".join(f"`{p.name}`" for p in merged.files)
        + f". {sum(merged.devices.values())} verdict(s)"
        + (f"; {merged.skipped} case(s) without a verdict are not shown." if merged.skipped else "."),
        "",
        "## Devices",
        "",
    ]
    device_rows = []
    for key in sorted(merged.devices):
        cols = _device_columns(key)
        cols[3] = _smem_label(cols[3])
        device_rows.append([ids[key], *cols])
    lines += _md_table(DEVICE_HEADER, device_rows)
    lines += [
        "",
        "Virtual-device rows judge the host-side stages only: their `pass` means the launch was "
        "accepted (stages after `launch` were not judged). `?`: the results file does not record it.",
        "",
    ]
    for arch, dtypes in _sections(merged):
        rows = merged.cells[arch, dtypes]
        tiles = _tiles(rows)
        lines += [f"## {arch} · {dtypes}", "", "Columns: CTA tile M x N x K, K in elements.", ""]
        table = []
        for key in sorted(rows):
            table.append(
                [
                    f"{ids[key]} {key.device}",
                    *(cell_text(rows[key][t]) if t in rows[key] else "-" for t in tiles),
                ]
            )
        lines += _md_table(["device", *tiles], table)
        lines.append("")
    failures = _failures(merged)
    if failures:
        lines += ["## Rejected configurations", ""]
        lines += _md_table(FAILURE_HEADER, [[row[0], f"`{row[1]}`", *row[2:]] for row in failures])
        lines.append("")
    return "\n".join(lines)


FAILURE_HEADER = ["row", "case", "stage", "status", "smem asked (B)", "limit (B)"]


def _failures(merged: Merged) -> list[list[str]]:
    ids = merged.row_ids()
    return [
        [ids[key], j.case_id, j.outcome, j.status, _number(j.smem_requested), _number(j.smem_limit)]
        for arch, dtypes in _sections(merged)
        for key, tiles in sorted(merged.cells[arch, dtypes].items())
        for cell in tiles.values()
        for j in cell.failures()
    ]


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;
color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 6px}
p.note{color:#57606a;max-width:70em}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{border:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600;white-space:nowrap}
td.dev{white-space:nowrap;font-weight:600}td{white-space:nowrap}
td.pass{background:#dafbe1}td.fail{background:#ffebe9}td.mixed{background:#fff8c5}
td.conflict{background:#fbefff}td.none{color:#8c959f}
td.virtual{border-left:4px solid #8250df}td.hardware{border-left:4px solid #1a7f37}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border:1px solid #d0d7de}
"""


def _cell_class(cell: Cell) -> str:
    if cell.conflicts:
        return "conflict"
    if cell.all_pass:
        return "pass"
    return "fail" if cell.none_pass else "mixed"


def _cell_title(cell: Cell) -> str:
    lines = []
    for j in sorted(cell.judged.values(), key=lambda j: j.case_id):
        smem = f" smem {_number(j.smem_requested)}/{_number(j.smem_limit)}" if j.smem_requested else ""
        status = f" {j.status}" if j.status else ""
        lines.append(f"{j.case_id}: {j.outcome}{status}{smem} [{j.file.name}]")
    return "\n".join(lines)


def _html_part(part: str) -> str:
    """``initialize 1/4 (Error Internal, 102,400 B > 101,376)`` on three lines."""
    head, paren, detail = part.partition(" (")
    if not paren or not detail.endswith(")"):
        return html.escape(part)
    return "<br>".join(html.escape(p) for p in [head, *detail[:-1].split(", ")])


def to_html(merged: Merged) -> str:
    """A self-contained page (inline CSS, no scripts, no external resources)."""
    e = html.escape
    ids = merged.row_ids()
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Tile conformance: merged compatibility table</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Tile conformance: merged compatibility table</h1>",
        f'<p class="note">Merged from {len(merged.files)} results file(s): '
        + ", ".join(f"<code>{e(p.name)}</code>" for p in merged.files)
        + f". {sum(merged.devices.values())} verdict(s)."
        + (f" {merged.skipped} case(s) without a verdict are not shown." if merged.skipped else "")
        + "</p>",
        '<p class="legend"><span style="background:#dafbe1">every case passed</span>'
        '<span style="background:#fff8c5">some rejected</span>'
        '<span style="background:#ffebe9">all rejected</span>'
        '<span style="background:#fbefff">results disagree</span>'
        '<span style="border-left:4px solid #1a7f37">hardware</span>'
        '<span style="border-left:4px solid #8250df">virtual device (through launch)</span></p>',
        "<h2>Devices</h2><table><tr>"
        + "".join(f"<th>{e(h)}</th>" for h in [*DEVICE_HEADER, "verdicts"])
        + "</tr>",
    ]
    for key in sorted(merged.devices):
        cols = _device_columns(key)
        cols[3] = _smem_label(cols[3])
        out.append(
            "<tr>"
            + "".join(f"<td>{e(c)}</td>" for c in [ids[key], *cols, str(merged.devices[key])])
            + "</tr>"
        )
    out.append("</table>")
    out.append(
        '<p class="note">Virtual-device rows judge the host-side stages only: their <code>pass</code> '
        "means the launch was accepted; stages after <code>launch</code> were not judged. "
        "<code>?</code>: the results file does not record it. Hover a cell for its cases.</p>"
    )
    for arch, dtypes in _sections(merged):
        rows = merged.cells[arch, dtypes]
        tiles = _tiles(rows)
        out.append(f"<h2>{e(arch)} · {e(dtypes)}</h2>")
        out.append("<table><tr><th>device</th>" + "".join(f"<th>{e(t)}</th>" for t in tiles) + "</tr>")
        for key in sorted(rows):
            cells = [f'<td class="dev {e(key.kind)}">{e(ids[key])} {e(key.device)}</td>']
            for tile in tiles:
                cell = rows[key].get(tile)
                if cell is None:
                    cells.append('<td class="none">—</td>')
                else:
                    title = e(_cell_title(cell))
                    text = "<br>".join(_html_part(part) for part in cell_parts(cell))
                    cells.append(f'<td class="{_cell_class(cell)}" title="{title}">{text}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
    out.append('<p class="note">Tiles are CTA M x N x K with K in elements of the activation type.</p>')
    failures = _failures(merged)
    if failures:
        out.append("<h2>Rejected configurations</h2><table><tr>")
        out.append("".join(f"<th>{e(h)}</th>" for h in FAILURE_HEADER) + "</tr>")
        for row in failures:
            out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
