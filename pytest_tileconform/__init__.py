"""pytest-tileconform: which CUTLASS grouped-GEMM tile configurations work on which GPU."""

from .backend import Backend
from .matrix.cases import Case
from .verdict import NotJudgeable, Stage, StageFailure, Verdict

__all__ = ["Backend", "Case", "NotJudgeable", "Stage", "StageFailure", "Verdict"]
