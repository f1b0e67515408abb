"""The merged compatibility table (:mod:`.merge`) as one self-contained HTML page.

Inline CSS, no scripts, no external resources: the page is uploaded as a CI artifact and opened
from disk. A cell is coloured by the category a reader must see first (a regression over a fix
over a known-bad tile over a pass), and hovering it lists its cases.
"""

from __future__ import annotations

import html

from .category import Category
from .merge import (
    LOUD,
    NOTABLE_TITLE,
    VIRTUAL_NOTE,
    Cell,
    Merged,
    Part,
    cell_parts,
    device_columns,
    device_header,
    legend_items,
    mark,
    notable_header,
    notable_rows,
    number,
    sections,
    summary_text,
    tiles_of,
)

#: a category's CSS class and background
STYLE = {
    Category.PASS: ("pass", "#dafbe1"),
    Category.UNRUN: ("unrun", "#e8e4f8"),
    Category.KNOWN_BAD: ("knownbad", "#fff8c5"),
    Category.REGRESSION: ("regression", "#ffcecb"),
    Category.FIXED: ("fixed", "#ddf4ff"),
    Category.NOT_JUDGED: ("notjudged", "#eaeef2"),
}
CONFLICT = ("conflict", "#fbefff")

_CSS = (
    """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;
color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 6px}
p.note{color:#57606a;max-width:70em}
table{border-collapse:collapse;margin:6px 0 4px}
th,td{border:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600;white-space:nowrap}
td.dev{white-space:nowrap;font-weight:600}td{white-space:nowrap}
td.none{color:#8c959f}
td.virtual{border-left:4px solid #8250df}td.hardware{border-left:4px solid #1a7f37}
b.regression{color:#a40e26}b.fixed{color:#0550ae}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.legend{font-size:12px;color:#57606a;margin:0 0 12px;max-width:90em}
.legend span{display:inline-block;padding:1px 6px;margin:0 4px 2px 0;border:1px solid #d0d7de}
"""
    + "".join(f"td.{name}{{background:{colour}}}" for name, colour in [*STYLE.values(), CONFLICT])
    + "\n"
)


def _cell_class(cell: Cell) -> str:
    return CONFLICT[0] if cell.conflicts else STYLE[cell.worst()][0]


def _cell_title(cell: Cell) -> str:
    lines = []
    for j in sorted(cell.judged.values(), key=lambda j: j.case_id):
        smem = f" smem {number(j.smem_requested)}/{number(j.smem_limit)}" if j.smem_requested else ""
        status = f" {j.status}" if j.status else ""
        lines.append(
            f"{j.case_id}: {j.category.value}{mark(j.through)} (expected {j.expected}, verdict "
            f"{j.outcome}{status}{smem}) [{j.file.name}]"
        )
    return "\n".join(lines)


def _part(part: Part) -> str:
    """``known-bad 1/4`` over its stage, status and shared memory, one per line."""
    head = html.escape(part.head)
    if part.category in LOUD:
        head = f'<b class="{STYLE[part.category][0]}">{head}</b>'
    return "<br>".join([head, *(html.escape(d) for d in part.details)])


def _code_spans(text: str) -> str:
    """Markdown's `code` spans of ``text`` as HTML, the rest escaped."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{piece}</code>" if i % 2 else piece for i, piece in enumerate(pieces))


def _legend(cells: list[Cell]) -> str:
    items = []
    for category, term, meaning in legend_items(cells):
        style = f' style="background:{STYLE[category][1]}"' if category is not None else ""
        items.append(f"<span{style}>{html.escape(term)}</span>{html.escape(meaning)}")
    return '<p class="legend">' + " &nbsp; ".join(items) + "</p>"


def to_html(merged: Merged) -> str:
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
        + f". {e(summary_text(merged))}.</p>",
        '<p class="legend"><span style="border-left:4px solid #1a7f37">hardware</span>'
        '<span style="border-left:4px solid #8250df">virtual device (through launch: unrun)</span>'
        '<span style="background:#fbefff">results disagree</span> cells are coloured by the '
        "category that needs a look first; hover a cell for its cases.</p>",
        "<h2>Devices</h2><table><tr>"
        + "".join(f"<th>{e(h)}</th>" for h in [*device_header(merged), "verdicts"])
        + "</tr>",
    ]
    for key in sorted(merged.devices):
        cols = [ids[key], *device_columns(key), str(merged.devices[key])]
        out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cols) + "</tr>")
    out.append("</table>")
    out.append(
        f'<p class="note">{_code_spans(VIRTUAL_NOTE)} Tiles are CTA M x N x K with K in elements of '
        "the activation type.</p>"
    )
    for arch, dtypes in sections(merged):
        rows = merged.cells[arch, dtypes]
        tiles = tiles_of(rows)
        out.append(f"<h2>{e(arch)} · {e(dtypes)}</h2>")
        out.append("<table><tr><th>device</th>" + "".join(f"<th>{e(t)}</th>" for t in tiles) + "</tr>")
        for key in sorted(rows):
            cells = [f'<td class="dev {e(key.kind)}">{e(ids[key])} {e(key.device)}</td>']
            for tile in tiles:
                cell = rows[key].get(tile)
                if cell is None:
                    cells.append('<td class="none">—</td>')
                    continue
                text = "<br>".join(_part(part) for part in cell_parts(cell))
                cells.append(f'<td class="{_cell_class(cell)}" title="{e(_cell_title(cell))}">{text}</td>')
            out.append("<tr>" + "".join(cells) + "</tr>")
        out.append("</table>")
        out.append(_legend([c for tiles_ in rows.values() for c in tiles_.values()]))
    notable = notable_rows(merged)
    if notable:
        out.append(f"<h2>{html.escape(NOTABLE_TITLE)}</h2><table><tr>")
        out.append("".join(f"<th>{e(h)}</th>" for h in notable_header(merged)) + "</tr>")
        for row in notable:
            out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
