"""The shipped matrices parsed once per test session: the commands tests run ``tileconform
tactics`` and ``matrices`` many times over the same files (sm100-flashinfer.yaml alone is about
a second of YAML composing a load), and each run loads every matrix again. What a load returns
is a frozen :class:`~pytest_tileconform.matrix.load.LoadedMatrix`; a remembered one is returned
only for the same path, text, kinds and limits, so a command still sees exactly what it would
load, and a matrix that does not load is loaded (and refused) every time."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_tileconform.matrix import load
from pytest_tileconform.matrix.kinds import CaseKind
from pytest_tileconform.matrix.load import LoadedMatrix

_LOADED: dict[Hashable, LoadedMatrix] = {}


def remember_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``load_matrix`` (looked up at call time, as the commands import it) remember what it
    loaded from a given text, for the rest of the session."""
    real: Callable[..., LoadedMatrix] = load.load_matrix

    def load_matrix(
        path: Path,
        kinds: Mapping[str, CaseKind],
        backends: Collection[str] | None = None,
        text: str | None = None,
        **options: Any,
    ) -> LoadedMatrix:
        if text is None or options.get("archs") is not None or options.get("dtypes") is not None:
            return real(path, kinds, backends, text, **options)
        key = (
            str(path),
            text,
            tuple(sorted((name, id(kind)) for name, kind in kinds.items())),
            None if backends is None else frozenset(backends),
            tuple(sorted(options.items())),
        )
        if key not in _LOADED:
            _LOADED[key] = real(path, kinds, backends, text, **options)
        return _LOADED[key]

    monkeypatch.setattr(load, "load_matrix", load_matrix)
