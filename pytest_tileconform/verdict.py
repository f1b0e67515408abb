"""The outcome vocabulary: the stages a case goes through and the verdict a backend returns.

A case walks the launcher's stages in order. It either gets through all of them (``pass``)
or is rejected at exactly one. An expectation in a matrix names that stage, so a known-bad
case only counts as an expected failure when it fails where it is known to fail.

A device judges through some stage. A pass judged short of ``run`` (a virtual device stops at
``launch``) saw no kernel run: it is reported as ``unrun``, never as a pass. This module is
the one place that says what was judged (:func:`kernel_ran`, :attr:`Verdict.unrun`,
:attr:`Verdict.reported`); every output reads it from here.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Stage(str, enum.Enum):
    """Where a case was rejected, in the order a case meets them."""

    COMPILE = "compile"  # nvcc error or static_assert in the instantiation
    # the harness's own preparation of the launcher's inputs failed (a TLLM_CHECK before
    # can_implement, an input it cannot build): never the kernel's verdict
    PREPARE = "prepare"
    CAN_IMPLEMENT = "can_implement"  # CUTLASS Gemm::can_implement() refused the arguments
    INITIALIZE = "initialize"  # Gemm::initialize() failed, e.g. smem over the opt-in limit
    LAUNCH = "launch"  # the launch itself was refused (bad grid, cluster, smem attribute)
    RUN = "run"  # the kernel faulted, timed out or left a sticky CUDA error
    NUMERICS = "numerics"  # the kernel ran but the output disagrees with the reference
    GRAPH = "graph"  # captured in a CUDA graph, a replay faulted or changed D
    REPEAT = "repeat"  # run again, D changed beyond what the epilogue's order allows (a race)
    # GEMM 1 -> GEMM 2 back to back without host synchronization, and in a replayed CUDA graph,
    # as FlashInfer launches them: a fault, or D changed beyond what the epilogue's order allows
    SEQUENCE = "sequence"
    SANITIZE = "sanitize"  # compute-sanitizer (memcheck, racecheck, ...) reported an error

    @property
    def order(self) -> int:
        return list(Stage).index(self)


#: What a matrix may expect: ``pass`` or the stage a case is rejected at.
EXPECTATIONS: tuple[str, ...] = ("pass", *(s.value for s in Stage))

#: The first stage only a device that runs the kernel can judge. A verdict judged through an
#: earlier one (a virtual device stops at ``launch``, a compile-only run at ``compile``) saw no
#: kernel run and no D: its pass is :data:`UNRUN`, never a plain pass.
KERNEL_RUN = Stage.RUN

#: The outcome of a pass whose kernel did not run, in every output (pytest's word, JUnit, the
#: results file, the tables): one word, so pytest's summary line stays ``N word`` pairs.
UNRUN = "unrun"


def kernel_ran(judged_through: Stage) -> bool:
    """Whether a verdict judged through ``judged_through`` saw the kernel run: the one
    definition of a judged kernel, which :attr:`Verdict.kernel_ran` and the results readers use."""
    return judged_through.order >= KERNEL_RUN.order


def reported(outcome: str, ran: bool) -> str:
    """The outcome as every output reports it: :data:`UNRUN` for a pass whose kernel did not run
    (``ran``: :func:`kernel_ran`), else ``outcome`` (``pass`` or the stage). The one definition of
    unrun, which :class:`Verdict` and the results file's verdicts both use."""
    return UNRUN if outcome == "pass" and not ran else outcome


def output_checked(judged_through: Stage) -> bool:
    """Whether a verdict judged through ``judged_through`` checked D against the reference: a
    pass judged short of it holds only that far (``graph``, ``repeat``, ``sequence`` and ``sanitize`` are
    further checks a run may add, not part of every full judgment)."""
    return judged_through.order >= Stage.NUMERICS.order


class StageFailure(Exception):
    """Raised by a case that was rejected; one subclass per stage.

    Known-bad cases are ``xfail(strict=True, raises=<subclass of their stage>)``, so a
    failure at any other stage is reported as a real failure by pytest itself.
    """

    stage: Stage

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.describe())
        self.verdict = verdict


STAGE_FAILURES: dict[Stage, type[StageFailure]] = {
    stage: type(
        f"{''.join(p.capitalize() for p in stage.value.split('_'))}Failure",
        (StageFailure,),
        {"stage": stage, "__module__": __name__},
    )
    for stage in Stage
}


@dataclass(frozen=True)
class Device:
    """What judged a verdict, as fields a results reader keys on (never parsed from ``source``).

    ``kind`` is ``hardware`` (a GPU ran the case), ``virtual`` (a virtual device of ``arch``
    answered the host-side stages) or ``build`` (decided before any device: code generation,
    nvcc, a compile-only run). ``name`` is the GPU's name, ``virtual <arch>`` or the build step.
    """

    kind: str
    name: str
    arch: str | None = None
    cc: str | None = None  # compute capability, "9.0"


@dataclass
class Verdict:
    """What a backend established for one case.

    ``failed_stage`` is None when the case got through every stage the backend judged;
    ``judged_through`` is the last stage the backend can speak for (a virtual device
    stops at ``launch``; hardware goes through ``numerics``).
    """

    failed_stage: Stage | None
    judged_through: Stage
    source: str
    status: str = ""
    detail: str = ""
    smem_requested: int | None = None
    smem_limit: int | None = None
    workspace_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    device: Device | None = None

    @property
    def passed(self) -> bool:
        return self.failed_stage is None

    @property
    def kernel_ran(self) -> bool:
        """The device ran the kernel (:func:`kernel_ran`)."""
        return kernel_ran(self.judged_through)

    @property
    def unrun(self) -> bool:
        """A pass of every stage judged, none of which ran the kernel (:data:`UNRUN`)."""
        return self.reported == UNRUN

    @property
    def outcome(self) -> str:
        """The verdict in the matrix's vocabulary: ``pass`` or the stage it failed at."""
        return "pass" if self.failed_stage is None else self.failed_stage.value

    @property
    def reported(self) -> str:
        """The outcome as the outputs report it (:func:`reported`)."""
        return reported(self.outcome, self.kernel_ran)

    def describe(self) -> str:
        parts = [f"{UNRUN} (judged through {self.judged_through.value})" if self.unrun else self.outcome]
        if self.status:
            parts.append(f"status={self.status!r}")
        if self.smem_requested is not None:
            limit = f"/{self.smem_limit}" if self.smem_limit is not None else ""
            parts.append(f"smem={self.smem_requested}{limit}")
        if self.detail:
            parts.append(self.detail)
        parts.append(f"[{self.source}]")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["failed_stage"] = self.failed_stage.value if self.failed_stage else None
        data["judged_through"] = self.judged_through.value
        data["outcome"] = self.outcome
        data["kernel_ran"] = self.kernel_ran
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        fields = {k: v for k, v in data.items() if k not in ("outcome", "kernel_ran")}
        stage = fields.pop("failed_stage")
        fields["failed_stage"] = Stage(stage) if stage else None
        fields["judged_through"] = Stage(fields["judged_through"])
        device = fields.pop("device", None)
        fields["device"] = Device(**device) if device else None
        return cls(**fields)


class NotJudgeable(Exception):
    """A backend cannot judge this case here (e.g. the arch is not present); the case skips."""


class UnusableEnvironment(Exception):
    """Nothing of a backend's can be judged on this host, for a reason of the host's, not of a
    case's configuration. The message is one line that says what to do; the session ends with
    it (:mod:`.core.environment`). Raised by a backend's ``check_environment`` and by the
    tools it builds with (the build cache, the compiler's inputs)."""
