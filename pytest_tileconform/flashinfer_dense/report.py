"""What a dense harness run decided: its ``verdict.json`` (``harness/dense_verdict.h``) and the
stage FlashInfer's launcher stopped at, read from the launcher's own message.

The launchers of FlashInfer 0.7.4's dense families run CUTLASS's path themselves
(``get_workspace_size``, ``can_implement``, ``initialize``, ``run``) and throw a
``std::runtime_error`` naming the step that failed: "Requested workspace size insufficient",
"... kernel will fail for params" (can_implement), "Failed to initialize ..." and "Failed to run
...", each followed by CUTLASS's status string after ``Error:``. :data:`LAUNCHER_STEPS` is that
reading, in one place; a message it does not know (a dispatch refusing its tile, a harness fault)
is no verdict.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..verdict import Stage

VERDICT_FILE = "verdict.json"

#: (words of the launcher's message, the harness's name for the step, the stage)
LAUNCHER_STEPS: tuple[tuple[re.Pattern[str], str, Stage], ...] = (
    (re.compile(r"workspace size insufficient", re.I), "prepare", Stage.PREPARE),
    (re.compile(r"will fail for params|can_implement", re.I), "can_implement", Stage.CAN_IMPLEMENT),
    (re.compile(r"Failed to initiali[sz]e", re.I), "initialize", Stage.INITIALIZE),
    (re.compile(r"Failed to run", re.I), "run", Stage.RUN),
)
_STATUS = re.compile(r"Error:\s*(.+?)(?:\s*\(|$)")


@dataclass(frozen=True)
class DenseReport:
    """One harness run's decision (:class:`..virtual.run.HarnessDecision`)."""

    fields: dict[str, Any]
    #: what cudaFuncSetAttribute was asked for in the run (the launcher's SharedStorageSize)
    smem_requested: int | None = None

    @classmethod
    def read(cls, run_dir: Path, smem_requested: int | None = None) -> DenseReport:
        try:
            data = json.loads((run_dir / VERDICT_FILE).read_text())
        except (OSError, ValueError):
            data = {}
        return cls(data if isinstance(data, dict) else {}, smem_requested)

    @property
    def final(self) -> bool:
        return self.fields.get("outcome") in ("returned", "threw")

    @property
    def passed(self) -> bool:
        return self.fields.get("outcome") == "returned"

    @property
    def message(self) -> str:
        return str(self.fields.get("message", ""))

    def _step(self) -> tuple[str, Stage] | None:
        for words, name, stage in LAUNCHER_STEPS:
            if words.search(self.message):
                return name, stage
        return None

    @property
    def name(self) -> str | None:
        if self.passed:
            return "pass"
        step = self._step()
        return step[0] if step else ("launcher" if self.final else None)

    @property
    def stage(self) -> Stage | None:
        step = None if self.passed else self._step()
        return step[1] if step else None

    @property
    def outside_cutlass(self) -> bool:
        """The launcher refused its inputs (the workspace it was given) before CUTLASS judged."""
        return self.name == "prepare"

    @property
    def status(self) -> str:
        found = _STATUS.search(self.message)
        return found[1].strip() if found else ""

    @property
    def workspace_bytes(self) -> int | None:
        value = self.fields.get("workspace_bytes")
        return value if isinstance(value, int) else None

    @property
    def cuda_error(self) -> Any:
        return None

    def describe(self) -> str:
        return f"{self.name}: {self.message}"
