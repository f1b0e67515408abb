"""Every Sphinx cross-reference role in the package (``:mod:``, ``:func:``, ``:class:``,
``:meth:``, ``:attr:``, ``:data:``, ``:exc:``) names something that exists, so a module's move
leaves no reference pointing at where it was.

A target resolves as Sphinx would read it in the module that writes it: leading dots are relative
to that module's package as in a relative import (``..compile.cache``), a bare name is looked up
in the module, then in its classes (``:attr:`value``` in a class's docstring, a class attribute,
a field or what its methods set on ``self``), then as an absolute
name (``pytest_tileconform...``, ``pytest.UsageError``) or a builtin (``OSError``)."""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest
from helpers.paths import REPO

PACKAGE = REPO / "pytest_tileconform"
ROLE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`(?:[^`<]*<)?~?([^`>]+)>?`")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def lookup(dotted: str) -> object | None:
    """The object ``dotted`` names: the longest prefix that imports, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = member(found, name)
            if found is None:
                return None
        return found
    return None


def member(owner: object, name: str) -> object | None:
    """An attribute, a dataclass or pydantic field, or an annotated name of ``owner``."""
    if hasattr(owner, name):
        found: object = getattr(owner, name)
        return found
    fields: dict[str, object] = (
        getattr(owner, "model_fields", None) or getattr(owner, "__dataclass_fields__", None) or {}
    )
    if name in fields:
        return fields[name]
    for klass in inspect.getmro(owner) if inspect.isclass(owner) else ():
        if name in getattr(klass, "__annotations__", {}):
            return klass
        # an instance attribute its methods set
        if klass.__module__ != "builtins" and re.search(rf"\bself\.{name}\s*[:=]", source(klass)):
            return klass
    return None


def source(klass: type) -> str:
    try:
        return inspect.getsource(klass)
    except (OSError, TypeError):
        return ""


def resolve(target: str, module: ModuleType, package: bool) -> object | None:
    target = target.rstrip("()")
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = module.__name__.split(".")
        # a package's own docstring is inside the package: one dot is the package itself
        keep = len(base) - dots + (1 if package else 0)
        return lookup(".".join([*base[:keep], target[dots:]])) if keep > 0 else None
    first, _, rest = target.partition(".")
    local = member(module, first)
    if local is not None:
        for name in rest.split(".") if rest else ():
            local = member(local, name)
            if local is None:
                break
        if local is not None:
            return local
    if "." not in target:
        for _, klass in inspect.getmembers(module, inspect.isclass):
            if klass.__module__ == module.__name__ and member(klass, target) is not None:
                return klass
    return lookup(target) or getattr(builtins, target, None)


def references() -> list[tuple[Path, int, str]]:
    found: list[tuple[Path, int, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found.extend((path, number, m.group(2)) for m in ROLE.finditer(line))
    return found


def test_the_package_writes_cross_references() -> None:
    assert len(REFERENCES) > 300


REFERENCES = references()
WRITERS = sorted({path for path, _, _ in REFERENCES})


@pytest.mark.parametrize("path", WRITERS, ids=[str(p.relative_to(PACKAGE)) for p in WRITERS])
def test_every_cross_reference_resolves(path: Path) -> None:
    module = importlib.import_module(module_name(path))
    stale = [
        f"{path.relative_to(REPO)}:{number}: {target}"
        for where, number, target in REFERENCES
        if where == path and resolve(target, module, is_package(path)) is None
    ]
    assert not stale, "\n".join(stale)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_of_the_pages_resolves() -> None:
    """A file's move leaves no Markdown page linking to where it was."""
    pages = [
        page
        for folder in ("", "docs", "benchmarks", "scripts", "lab", "results", "examples")
        for page in sorted((REPO / folder).glob("*.md") if folder else REPO.glob("*.md"))
    ]
    assert len(pages) > 8
    broken = [
        f"{page.relative_to(REPO)}: {match.group(1)}"
        for page in pages
        for match in LINK.finditer(page.read_text(encoding="utf-8"))
        if not match.group(1).startswith(("http://", "https://", "mailto:"))
        and not (page.parent / match.group(1)).exists()
    ]
    assert broken == []
