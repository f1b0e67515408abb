"""Where the repository's files are, for tests at any depth under ``tests/``."""

from __future__ import annotations

from pathlib import Path

#: the checkout's root (pyproject.toml, matrices/, results/, benchmarks/)
REPO = Path(__file__).resolve().parents[2]
#: the tests' recorded inputs (probe outputs, pinned actions, workflow stand-ins)
DATA = REPO / "tests" / "data"
#: the test plugin ``tileconform_faults`` (load it with ``-p`` and this folder on sys.path)
PLUGINS = Path(__file__).resolve().parent / "plugins"
#: the shipped smoke matrix
SMOKE = REPO / "matrices" / "smoke-sm90.yaml"
