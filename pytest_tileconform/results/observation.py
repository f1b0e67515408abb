"""One case's result as a run saw it: what the terminal grid and the results file are made of.

It lies below the run's state (:mod:`..core.session`, which gathers them) so that the results
wing reads it without reaching up into the core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..matrix.cases import Case
from ..verdict import Verdict

#: A run's case of a matrix by its id (None: not a case of it any more)
CaseLookup = Callable[[Path, str], "Case | None"]


@dataclass
class Observation:
    """One case's result as the controller saw it in the test reports."""

    case_id: str
    matrix: Path
    outcome: str  # pytest's: passed, unrun (a pass whose kernel did not run), failed, skipped, xfailed
    verdict: Verdict | None
    skip_reason: str = ""
    duration: float = 0.0  # seconds the case's call phase took
    at: float = 0.0  # seconds from the start of the session to this report
    worker: str = ""  # the pytest-xdist worker that ran the case ("" without xdist)
