"""The results file (``--tile-report``) as typed models: what every reader and the writer agree on.

The models describe the current format (:data:`FORMAT`); :mod:`.store` reads older formats by
upgrading them to it first, so nothing past the store sees an old layout. ``tileconform report
schema`` prints :func:`json_schema`.

A verdict mirrors :meth:`pytest_tileconform.verdict.Verdict.to_json` field for field, with its
``device``: the structured identity (kind, name, arch, compute capability) of what judged it.
Readers key on that, never on the free-text ``source``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from ..verdict import EXPECTATIONS, UNRUN, Stage, Verdict, kernel_ran, reported

#: The format this version writes. 2: verdicts carry ``device`` (format 1 named it only in
#: ``source``). 3: verdicts carry ``kernel_ran``, cases ``expected_status``, and pytest's outcome of
#: a pass whose kernel did not run is ``unrun``.
FORMAT: Final = 3
#: The formats :mod:`.store` reads (older ones are upgraded when read).
READABLE_FORMATS = (1, 2, 3)

#: ``pass`` or the stage a case was rejected at (``verdict.EXPECTATIONS``).
Outcome = Literal[EXPECTATIONS]  # type: ignore[valid-type]
DeviceKind = Literal["hardware", "virtual", "build"]
_SHAPE = r"^\d+x\d+x\d+$"


class _Strict(BaseModel):
    """Unknown keys are errors: the format number changes when the fields do."""

    model_config = ConfigDict(extra="forbid")


class DeviceRecord(_Strict):
    """What judged a verdict (``verdict.Device``): a GPU, a virtual device, or the build itself."""

    kind: DeviceKind = Field(
        description="hardware: a GPU ran the case; virtual: a virtual device answered the host-side "
        "stages; build: decided before any device (code generation, nvcc, compile only)"
    )
    name: str = Field(description="the GPU's name, 'virtual <arch>', or the build step")
    arch: str | None = Field(default=None, description="the device's architecture, e.g. sm90")
    cc: str | None = Field(default=None, description="compute capability, e.g. '9.0'")

    def identity(self) -> tuple[str, str, str | None, str | None]:
        return (self.kind, self.name, self.arch, self.cc)


class VerdictRecord(_Strict):
    """One verdict as ``Verdict.to_json()`` writes it."""

    failed_stage: Stage | None = Field(default=None, description="null when every judged stage passed")
    judged_through: Stage = Field(description="the last stage the backend can speak for")
    source: str = Field(description="what judged it, for people; readers use 'device'")
    status: str = ""
    detail: str = ""
    smem_requested: int | None = Field(default=None, description="shared memory the kernel asked for (B)")
    smem_limit: int | None = Field(default=None, description="the limit it was checked against (B)")
    workspace_bytes: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="backend details: timings, build, ...")
    device: DeviceRecord | None = Field(default=None, description="null when the backend did not say")
    outcome: Outcome = Field(description="'pass' or failed_stage")
    kernel_ran: bool = Field(
        description="whether the device ran the kernel (judged through 'run' or later); a pass "
        f"without it is '{UNRUN}', never a plain pass"
    )

    @model_validator(mode="after")
    def _kernel_ran_follows_judged_through(self) -> VerdictRecord:
        """``kernel_ran`` is stored for readers that do not know the stage order; it must say
        what ``judged_through`` says (:func:`..verdict.kernel_ran`)."""
        if self.kernel_ran != kernel_ran(self.judged_through):
            raise ValueError(
                f"kernel_ran {str(self.kernel_ran).lower()} contradicts judged_through "
                f"{self.judged_through.value!r}"
            )
        return self

    @property
    def unrun(self) -> bool:
        """A pass whose kernel did not run (:attr:`..verdict.Verdict.unrun`)."""
        return self.reported == UNRUN

    @property
    def reported(self) -> str:
        """``unrun``, ``pass`` or the stage (:func:`..verdict.reported`)."""
        return reported(str(self.outcome), self.kernel_ran)

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictRecord:
        return cls.model_validate(verdict.to_json())

    def to_verdict(self) -> Verdict:
        return Verdict.from_json(self.model_dump(mode="json"))


class CaseRecord(BaseModel):
    """A case's coordinates (``Case.record()``): the core's frame typed here, the tile as
    ``MxNxK`` with K in elements; every other key is the backend's (:mod:`..matrix.kinds`), kept
    as written and read by the backend's own record (the ``record`` of a :class:`..matrix.kinds.CaseKind`), so
    the core rejects no backend's coordinates."""

    model_config = ConfigDict(extra="allow")

    arch: str
    act: str
    weight: str
    out: str
    tile: str = Field(pattern=_SHAPE, description="CTA tile MxNxK, K in elements of the activation type")

    def coordinates(self, records: Iterable[type[BaseModel]] = ()) -> dict[str, Any]:
        """The backend's keys and their values, a key recorded as null left out (a file written
        before the backend had the key has none). With ``records`` (the backends' typed records),
        as the first that reads them states them: what an older file left out filled in."""
        found = {key: value for key, value in (self.model_extra or {}).items() if value is not None}
        for record in records:
            try:
                typed = record.model_validate(found).model_dump(mode="json")
            except ValidationError:
                continue
            return {key: value for key, value in typed.items() if value is not None}
        return found

    def same_case(self, other: CaseRecord, records: Iterable[type[BaseModel]] = ()) -> bool:
        """The same coordinates, whichever of the two states what the matrix left out (read by
        the backends' ``records``)."""
        records = tuple(records)
        frame = {"arch", "act", "weight", "out", "tile"}
        return self.model_dump(include=frame) == other.model_dump(include=frame) and (
            self.coordinates(records) == other.coordinates(records)
        )


class CaseEntry(_Strict):
    """One test case of the run, judged or not."""

    matrix: str | None = Field(default=None, description="the matrix file the case came from")
    id: str
    outcome: str | None = Field(
        default=None,
        description=f"pytest's outcome after the case's expectation: passed, {UNRUN} (passed what was "
        "judged, the kernel did not run), failed, skipped, xfailed, xpassed or error (another plugin "
        "may report its own word, e.g. rerun)",
    )
    expected: Outcome | None = Field(default=None, description="what the matrix expected")
    expected_status: str | None = Field(
        default=None, description="the status the matrix's expectation records; absent when none"
    )
    case: CaseRecord | None = Field(description="null when the case is no longer in its matrix")
    verdict: VerdictRecord | None = Field(default=None, description="null when the case was not judged")
    duration_s: float | None = Field(default=None, description="the case's call phase")
    finished_at_s: float | None = Field(default=None, description="seconds from the plugin's start")
    worker: str | None = Field(default=None, description="the pytest-xdist worker; absent without xdist")
    skip_reason: str | None = Field(default=None, description="why a skipped case was not judged")

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("worker", "skip_reason", "expected_status"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class GpuRecord(_Strict):
    name: str
    cc: str
    driver: str


class Fingerprint(BaseModel):
    """The host's part of where verdicts came from. The core fills ``gpus``, ``driver``,
    ``cuda_driver`` and ``tileconform``; every other key is a backend's, contributed through
    ``pytest_tileconform_host_fingerprint`` and declared through
    ``pytest_tileconform_host_columns`` (:class:`.fingerprint.HostColumn`), kept as written."""

    model_config = ConfigDict(extra="allow")

    gpus: list[GpuRecord] = Field(default_factory=list, description="from nvidia-smi; empty without a driver")
    driver: str | None = None
    cuda_driver: str | None = Field(default=None, description="the CUDA version the driver reports")
    tileconform: str | None = None


class Host(_Strict):
    node: str | None = None
    python: str | None = None
    fingerprint: Fingerprint | None = Field(default=None, description="absent in early format-1 files")


class ResultsDocument(_Strict):
    """A ``--tile-report`` file. ``finished_at_s`` of a case counts from the plugin's start in the
    pytest process; ``startup_s`` is how long after the process's own start that was."""

    model_config = ConfigDict(extra="forbid", title="tileconform results")

    format: Literal[3]
    created: str | None = Field(default=None, description="ISO 8601, UTC")
    host: Host = Field(default_factory=Host)
    startup_s: float | None = None
    cases: list[CaseEntry]

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def judged(self) -> list[tuple[CaseEntry, VerdictRecord]]:
        """The cases with a verdict, in file order."""
        return [(entry, entry.verdict) for entry in self.cases if entry.verdict is not None]


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a results file of :data:`FORMAT`."""
    schema = ResultsDocument.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
