"""``tileconform matrices``: the matrices that ship with the package, listed or copied out.

They are the repository's top-level ``matrices/`` folder, the one copy of them; the wheel carries
it as ``pytest_tileconform/matrices/`` (pyproject maps the data package there), so an installed
package can run them without a checkout: ``tileconform matrices copy smoke-sm90`` and then
``pytest --tile-matrix smoke-sm90.yaml``. A source checkout (an editable install) has no such
folder inside the package; there the top-level one is read where it is.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...commands.output import EXIT_ENVIRONMENT, EXIT_OK, CommandError, emit, message

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

SUFFIX = ".yaml"


def shipped_folder() -> Traversable:
    """Where the shipped matrices are: in the installed package, else in the source checkout."""
    packaged = importlib.resources.files("pytest_tileconform") / "matrices"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "matrices").is_dir():
        return checkout / "matrices"
    raise CommandError(
        f"no shipped matrices: neither {packaged} nor a source checkout's matrices/ folder exists "
        "(was the wheel built without its package data?)",
        EXIT_ENVIRONMENT,
    )


@dataclass(frozen=True)
class Shipped:
    name: str  # the file name without .yaml: what 'copy' takes
    file: Traversable
    archs: tuple[str, ...]
    cases: int | None  # None: the matrix does not load (the message says why)
    about: str  # its first comment line
    problem: str = ""


def _about(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line.strip():
            break
    return ""


def describe(file: Traversable) -> Shipped:
    """One shipped matrix, loaded as the plugin loads it (so its case count is pytest's), with the
    cases every installed backend declares: the shipped matrices are not all FlashInfer MoE's."""
    from ...commands.plugins import command_plugins
    from ...matrix.load import MatrixInvalid, load_matrix

    kinds = command_plugins().kinds()
    text = file.read_text(encoding="utf-8")
    name = file.name.removesuffix(SUFFIX)
    try:
        loaded = load_matrix(Path(file.name), kinds, set(kinds), text=text)
    except MatrixInvalid as exc:
        return Shipped(name, file, (), None, _about(text), str(exc).splitlines()[0])
    archs = tuple(sorted({c.arch for c in loaded.cases}, key=lambda a: (len(a), a)))
    return Shipped(name, file, archs, len(loaded.cases), _about(text))


def shipped() -> list[Shipped]:
    folder = shipped_folder()
    files = [f for f in folder.iterdir() if f.name.endswith(SUFFIX)]
    return sorted((describe(f) for f in files), key=lambda m: m.name)


def table(matrices: list[Shipped]) -> str:
    rows = [("name", "arch", "cases", "about")]
    rows += [
        (m.name, ",".join(m.archs) or "-", "?" if m.cases is None else str(m.cases), m.about)
        for m in matrices
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            row[0].ljust(widths[0]),
            row[1].ljust(widths[1]),
            row[2].rjust(widths[2]) if index else row[2],
        ]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    return "\n".join(lines) + "\n"


def _list(args: argparse.Namespace) -> int:
    matrices = shipped()
    sys.stdout.write(table(matrices))
    sys.stdout.flush()
    for m in matrices:
        if m.cases is None:
            message(f"warning: {m.name} does not load: {m.problem}")
    message(f"in {shipped_folder()}; 'tileconform matrices copy NAME [DEST]' copies one out")
    return EXIT_OK


def find(name: str) -> Shipped:
    """The shipped matrix ``name`` (with or without .yaml)."""
    folder = shipped_folder()
    wanted = name.removesuffix(SUFFIX) + SUFFIX
    file = folder / wanted
    if "/" in name or not file.is_file():
        names = sorted(f.name.removesuffix(SUFFIX) for f in folder.iterdir() if f.name.endswith(SUFFIX))
        raise CommandError(f"no shipped matrix {name!r}; choose one of {', '.join(names)}")
    return describe(file)


def _copy(args: argparse.Namespace) -> int:
    from ...files import write_atomic

    matrix = find(args.name)
    text = matrix.file.read_text(encoding="utf-8")
    if args.dest == "-":
        emit(text, None)
        return EXIT_OK
    dest = Path(args.dest) if args.dest is not None else Path(matrix.file.name)
    if dest.is_dir() or (args.dest or "").endswith(("/", os.sep)):
        dest = dest / matrix.file.name
    if dest.exists() and not args.force:
        raise CommandError(f"{dest} exists; --force overwrites it")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(dest, text)
    except OSError as exc:
        raise CommandError(f"cannot write {dest}: {exc.strerror or exc}") from None
    message(f"wrote {dest} ({matrix.cases} case(s)); run it with: pytest --tile-matrix {dest}")
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "matrices",
        help="list the matrices shipped with the package, or copy one out",
        usage="%(prog)s [-h] [list | copy NAME [DEST] [--force]]",
        description="List the tile matrices shipped with the package (name, architectures, case "
        "count, first comment line), or copy one out to run it with pytest --tile-matrix.",
    )
    parser.set_defaults(handler=_list)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("list", help="list them (the default)", description="List the shipped matrices.")
    copy = actions.add_parser(
        "copy",
        help="copy one out",
        description="Copy a shipped matrix to DEST: a file, or a folder to put NAME.yaml in "
        "(default: NAME.yaml here; '-': stdout). An existing file is kept unless --force is given.",
    )
    copy.add_argument("name", metavar="NAME", help="as 'tileconform matrices' lists it (smoke-sm90)")
    copy.add_argument("dest", nargs="?", default=None, metavar="DEST", help="file or folder")
    copy.add_argument("-f", "--force", action="store_true", help="overwrite DEST if it exists")
    copy.set_defaults(handler=_copy)
