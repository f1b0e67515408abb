"""How the matrix files reach pytest's collection: as the arguments pytest collects.

pytest reads an argument ``a::b.yaml`` as the test ``b.yaml`` of the file ``a`` and refuses
``m[0].yaml`` as a parametrization of a path, so a matrix whose path holds ``::`` or ``[`` cannot be
an argument. Its nearest folder whose path holds neither is given instead, and
:class:`OnlyMatrices` keeps that folder's collection to the matrix files in it (and the folders
on the way to them): the run collects what it would have collected from the file itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest


def _collectable(path: Path) -> bool:
    return "::" not in str(path) and "[" not in str(path)


def collection_args(paths: Iterable[Path]) -> tuple[list[str], set[Path]]:
    """The arguments that make pytest collect ``paths``, and the folders given in place of a
    matrix that could not be an argument itself."""
    args: list[str] = []
    folders: set[Path] = set()
    for path in paths:
        if _collectable(path):
            args.append(str(path))
            continue
        folder = path.parent
        while not _collectable(folder):
            folder = folder.parent
        folders.add(folder)
        args.append(str(folder))
    return list(dict.fromkeys(args)), folders


class OnlyMatrices:
    """Under a folder given in place of a matrix, pytest collects the matrix files and the
    folders that lead to them, nothing else, unless the user named it (or a folder above it,
    or one inside it) among pytest's own arguments."""

    def __init__(self, folders: set[Path], matrices: Iterable[Path], named: Iterable[str]) -> None:
        self.folders = folders
        self.keep = set(matrices)
        self.keep |= {parent for path in self.keep for parent in path.parents}
        self.named = [Path(arg.split("::", 1)[0]).resolve() for arg in named]

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        path = collection_path.resolve()
        if path in self.keep or not any(folder in path.parents for folder in self.folders):
            return None
        if any(arg == path or arg in path.parents or path in arg.parents for arg in self.named):
            return None
        return True
