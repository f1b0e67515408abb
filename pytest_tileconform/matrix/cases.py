"""A matrix case: one (arch, dtypes, tile, cluster, dynamic cluster, swap_ab, fusion, epilogue,
mainloop, kernel arch, pdl, problem) combination."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..archs import arch_number
from ..dtypes import shape_label
from .schema import Expectation, Problem, Shape


@dataclass(frozen=True, slots=True)
class Case:
    """One parametrized test. ``id`` is its stable, readable name within the matrix."""

    matrix: Path
    backend: str
    arch: str
    act: str
    weight: str
    out: str
    dtype_label: str
    tile: Shape
    cluster: Shape
    swap_ab: bool
    fusion: str
    problem: Problem
    expectation: Expectation | None
    suite: str | None
    #: Programmatic dependent launch on or off; None: what the backend does by default (FlashInfer
    #: 0.7.4 turns it on from SM90: ``enable_pdl=None`` becomes ``device_support_pdl``, major >= 9)
    pdl: bool | None = None
    #: SM10x epilogue schedule ("tma" or "nosmem"); None: the launcher's default (TMA)
    epilogue: str | None = None
    #: SM10x dynamic CGA: the runtime cluster; None: the cluster is static
    dynamic_cluster: Shape | None = None
    #: SM90 mixed input: the mainloop schedule (pingpong, cooperative, single_warpgroup_prefill or
    #: single_warpgroup_rolling); None: the launcher fixes it
    mainloop: str | None = None
    #: Another arch's kernel set built for this arch (``sm100`` on sm103); None: the arch's own
    kernel_arch: str | None = None
    id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", self._make_id())

    def _make_id(self) -> str:
        parts = [
            self.arch,
            self.dtype_label,
            shape_label(self.tile),
            "c" + shape_label(self.cluster),
        ]
        if self.dynamic_cluster is not None:
            parts.append("dyn" + shape_label(self.dynamic_cluster))
        parts.append(self.fusion)
        if self.epilogue == "nosmem":  # the TMA epilogue, given or not, keeps the ids cases had
            parts.append("nosmem")
        if self.mainloop is not None:
            parts.append(self.mainloop)
        if self.kernel_arch is not None:
            parts.append(f"{self.kernel_arch}kernel")
        if self.swap_ab:
            parts.append("swapab")
        if self.pdl is not None:  # cases that leave it to the backend keep the ids they had
            parts.append("pdl" if self.pdl else "nopdl")
        if self.problem.name:
            parts.append(self.problem.name)
        return "-".join(parts)

    @property
    def expected(self) -> str:
        """``pass`` or the stage this case is known to fail at."""
        return self.expectation.stage if self.expectation else "pass"

    @property
    def sm(self) -> int:
        """The arch as a number: ``sm120`` -> 120."""
        return arch_number(self.arch)

    def describe(self) -> dict[str, Any]:
        """The case's coordinates, for reports and junit properties. ``pdl`` and the problem's
        ``bias``, ``seed``, ``tokens`` and ``top_k`` appear where they are set (not the default),
        so a case that sets none of them is described as it was before they existed."""
        found: dict[str, Any] = {
            "arch": self.arch,
            "act": self.act,
            "weight": self.weight,
            "out": self.out,
            "tile": shape_label(self.tile),
            "cluster": shape_label(self.cluster),
            "swap_ab": self.swap_ab,
            "fusion": self.fusion,
        }
        if self.epilogue is not None:
            found["epilogue"] = self.epilogue
        if self.dynamic_cluster is not None:
            found["dynamic_cluster"] = shape_label(self.dynamic_cluster)
        if self.mainloop is not None:
            found["mainloop"] = self.mainloop
        if self.kernel_arch is not None:
            found["kernel_arch"] = self.kernel_arch
        if self.pdl is not None:
            found["pdl"] = self.pdl
        found["problem"] = {
            "name": self.problem.name,
            "rows": list(self.problem.rows_per_expert),
            "n": self.problem.n,
            "k": self.problem.k,
            **self.problem.recorded(),
        }
        return found
