"""FlashInfer's Python files are parsed safely from thread pools (the release probe's)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.pysource import parse_file


@pytest.fixture
def switching_collector() -> Iterator[None]:
    """A collection every hundred allocations that yields the GIL as it starts: what a finalizer
    running inside one thread's ``ast.parse`` does, which CPython 3.11 does not survive when
    another thread parses meanwhile (python/cpython#106905)."""

    def yield_gil(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            time.sleep(0)

    threshold = gc.get_threshold()
    gc.callbacks.append(yield_gil)
    gc.set_threshold(100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(yield_gil)


@pytest.mark.usefixtures("switching_collector")
def test_threads_parse_at_once(tmp_path: Path) -> None:
    script = tmp_path / "core.py"
    script.write_text(
        "".join(f"def f{i}(x):\n    return [x + {i}, {{'k': (x, [{i}])}}]\n" for i in range(300))
    )
    with ThreadPoolExecutor(2) as pool:
        trees = list(pool.map(lambda _: parse_file(script), range(8)))
    assert all(len(tree.body) == 300 for tree in trees)


def test_a_syntax_error_names_the_file(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("def f(:\n")
    with pytest.raises(SyntaxError) as error:
        parse_file(script)
    assert error.value.filename == str(script)


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    script = tmp_path / "core.py"
    script.write_text("a = 1\n")
    first = parse_file(script)
    assert parse_file(script) is first  # kept while the file stays the same
    script.write_text("a = 1\nb = 2\n")
    assert len(parse_file(script).body) == 2
