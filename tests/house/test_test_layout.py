"""The tests mirror the package: every test module sits in a wing's folder (none loose in
``tests/``), what tests share is in ``tests/helpers``, and no test module imports another, so a
module can move or go without breaking a second one."""

from __future__ import annotations

import ast

from helpers.paths import REPO

TESTS = REPO / "tests"


def test_no_test_module_sits_loose_in_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_no_test_module_imports_another() -> None:
    imports = []
    for path in sorted(TESTS.rglob("*.py")):
        if "data" in path.relative_to(TESTS).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            imports += [
                f"{path.relative_to(TESTS)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[-1].startswith("test_") or name.startswith("conftest")
            ]
    assert imports == []
