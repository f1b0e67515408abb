"""What the harness decided about a case: its ``verdict.json`` (written by ``harness/harness.cu``,
schema ``tileconform.flashinfer.verdict/1``), read from the case's run directory.

The harness names the stage it stopped at: ``setup`` (it never reached its own preparation of
the launcher's inputs: bad inputs, no device), ``prepare`` (its preparation failed, or the
launcher refused what it prepared before CUTLASS judged anything), ``can_implement``,
``initialize``, ``launch``, ``run``, ``graph``, ``repeat``, ``sequence`` or ``pass``.
:data:`STAGES` is the one map from those names to the stages a case can fail at; the hardware
run and the virtual device each decide from it which of them are verdicts where they judge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verdict import Stage

VERDICT_FILE = "verdict.json"

#: The harness's stage names that say where a case failed.
STAGES: dict[str, Stage] = {
    "prepare": Stage.PREPARE,
    "can_implement": Stage.CAN_IMPLEMENT,
    "initialize": Stage.INITIALIZE,
    "launch": Stage.LAUNCH,
    "run": Stage.RUN,
    "graph": Stage.GRAPH,
    "repeat": Stage.REPEAT,
    "sequence": Stage.SEQUENCE,
}
#: The stages during which the harness writes a preliminary verdict (``final`` false): a
#: process that ends then leaves that stage behind.
RUNNING = ("run", "graph", "repeat", "sequence")


@dataclass(frozen=True)
class HarnessReport:
    """One ``verdict.json``; ``fields`` is empty when the harness wrote none (or not JSON)."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, run_dir: Path) -> HarnessReport:
        try:
            data = json.loads((run_dir / VERDICT_FILE).read_text())
        except (OSError, ValueError):
            return cls()
        return cls(data if isinstance(data, dict) else {})

    @property
    def final(self) -> bool:
        """The harness reached a verdict of its own (it was not ended halfway)."""
        return bool(self.fields.get("final"))

    @property
    def name(self) -> str | None:
        """The stage name as the harness wrote it (None: it wrote none)."""
        name: str | None = self.fields.get("stage")
        return name

    @property
    def passed(self) -> bool:
        return self.name == "pass"

    @property
    def stage(self) -> Stage | None:
        """The stage the case failed at; None when it passed, when the harness never reached
        the launcher (``setup``) or wrote no stage it knows."""
        return STAGES.get(self.name) if isinstance(self.name, str) else None

    @property
    def outside_cutlass(self) -> bool:
        """The harness's preparation or the launcher's own checks refused the case, not
        CUTLASS's host code."""
        return self.name == "prepare"

    @property
    def setup_failed(self) -> bool:
        """The harness never reached the launcher: its own fault, not a verdict on the case."""
        return self.name == "setup"

    @property
    def decided_before_run(self) -> bool:
        """The harness reached its verdict before the kernel ran (so a runner that died
        afterwards did not decide the case)."""
        return self.final and self.name not in (None, *RUNNING, "pass")

    @property
    def interrupted_stage(self) -> Stage | None:
        """The stage whose preliminary verdict is all the harness wrote: the process ended
        there. None when the harness finished its verdict (or wrote none)."""
        if self.final or self.name not in RUNNING:
            return None
        return STAGES[self.name]

    @property
    def status(self) -> str:
        status: str = self.fields.get("status", "")
        return status

    @property
    def message(self) -> str:
        message: str = self.fields.get("message", "")
        return message

    @property
    def smem_requested(self) -> int | None:
        return self.fields.get("smem_requested")

    @property
    def smem_limit(self) -> int | None:
        return self.fields.get("smem_limit")

    @property
    def workspace_bytes(self) -> int | None:
        return self.fields.get("workspace_bytes")

    @property
    def cuda_error(self) -> dict[str, Any] | None:
        """The first failed CUDA call the harness saw (call, name, string), if any."""
        return self.fields.get("cuda_error")

    @property
    def cleared_errors(self) -> list[dict[str, Any]]:
        """Pending (non-sticky) CUDA errors the harness cleared before or after the case."""
        errors = self.fields.get("cleared_errors")
        return errors if isinstance(errors, list) else []

    @property
    def use_reduction(self) -> bool:
        """The finalize epilogue reduced several rows into one output row (red.add): D may
        then differ run to run within the reduction order's rounding."""
        problem = self.fields.get("problem")
        return isinstance(problem, dict) and bool(problem.get("use_reduction"))

    def given(self, *keys: str) -> dict[str, Any]:
        """Those of ``keys`` the report has, with their values (null ones too)."""
        return {key: self.fields[key] for key in keys if key in self.fields}

    def describe(self) -> str:
        """``status: message``, for errors that are no verdict."""
        return f"{self.fields.get('status')}: {self.fields.get('message')}"
