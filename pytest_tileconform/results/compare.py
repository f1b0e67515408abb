"""``tileconform report compare A.json B.json``: do two results files agree, case by case?

Cases are matched by id (by matrix file name and id where a run judged one id in several
matrices). How a pair of verdicts is compared depends on what judged them:

- hardware against virtual (one file all hardware, the other all virtual, or the two verdicts of
  a case): a virtual device judges through ``launch``, so a hardware ``pass`` or a failure after
  ``launch`` (the launch was accepted) agrees with a virtual pass (``unrun``): that much was not
  judged. A virtual failure is a claim at its stage, even past ``launch`` (a run fault the host
  predicted), so it must be the hardware's stage; so must the shared memory the kernel asked for.
  Build-stage verdicts (compile failures) of such a pair are compared the same way.
- otherwise (the same kind of device), exactly: every field of :data:`EXACT_FIELDS`. Timings,
  build paths and the rest of ``extra``, the free-text ``source`` and pytest's outcome (which
  follows the matrix's expectations) are not compared; a pass whose kernel did not run reads
  ``unrun``. A case judged in one file and not in the other disagrees.

Cases in only one file, and in the hardware-against-virtual comparison cases judged by only
one, are listed but decide nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from ..verdict import Stage
from .model import CaseEntry, ResultsDocument, VerdictRecord

#: What an exact comparison compares: fields of the verdict; ``device`` is its kind, name, arch, cc.
EXACT_FIELDS = (
    "outcome",
    "failed_stage",
    "judged_through",
    "status",
    "detail",
    "smem_requested",
    "smem_limit",
    "workspace_bytes",
    "device",
)
#: a hardware verdict past launch: the launch was accepted, as a virtual pass says
BEYOND_LAUNCH = ("pass", *(s.value for s in Stage if s.order > Stage.LAUNCH.order))
HARDWARE_VIRTUAL = "hardware vs virtual"
#: how the summary counts the hardware-vs-virtual agreements that hold through launch only
UNRUN_AGREE = "through launch only (unrun on the virtual device)"
EXACT = "exact"


@dataclass(frozen=True)
class Disagreement:
    case_id: str
    mode: str  # HARDWARE_VIRTUAL or EXACT
    a: str  # what each file says, in the words of the comparison
    b: str


@dataclass
class Comparison:
    """The outcome of comparing file A with file B."""

    hardware_side: str | None  # "a" or "b" when the whole comparison is hardware vs virtual
    agreeing: dict[str, int] = field(default_factory=dict)  # per mode
    disagreements: list[Disagreement] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)  # case ids in A only
    only_b: list[str] = field(default_factory=list)
    judged_only_a: list[str] = field(default_factory=list)  # listed, not a disagreement
    judged_only_b: list[str] = field(default_factory=list)
    #: hardware-vs-virtual pairs that agree only through launch: the virtual verdict is unrun
    unrun_agreeing: int = 0

    @property
    def compared(self) -> int:
        return sum(self.agreeing.values()) + len(self.disagreements)

    @property
    def agree(self) -> bool:
        return not self.disagreements

    def modes(self) -> set[str]:
        return {m for m, n in self.agreeing.items() if n} | {d.mode for d in self.disagreements}


def _kind(verdict: VerdictRecord) -> str:
    return verdict.device.kind if verdict.device is not None else "unknown"


def _device_kinds(document: ResultsDocument) -> set[str]:
    """The kinds of device that judged a file's verdicts, build-stage verdicts left out."""
    return {_kind(v) for _, v in document.judged()} - {"build"}


def _launch_key(verdict: VerdictRecord, exact: bool = False) -> tuple[str, int | None]:
    """What a hardware-vs-virtual comparison holds a verdict to: its stage, or ``launch
    accepted`` for one past launch unless ``exact`` (the other side claims a stage past it)."""
    outcome = str(verdict.outcome)
    accepted = outcome in BEYOND_LAUNCH and not exact
    return ("launch accepted" if accepted else outcome, verdict.smem_requested)


def _hardware_virtual_keys(
    va: VerdictRecord, vb: VerdictRecord, virtual_side: str | None
) -> tuple[tuple[str, int | None], tuple[str, int | None]]:
    """The keys of a hardware-vs-virtual pair (see the module docstring); ``virtual_side``:
    which of the two is virtual ("a" or "b"; None for two build-stage verdicts)."""
    virtual = {"a": va, "b": vb}.get(virtual_side or "")
    exact = virtual is not None and str(virtual.outcome) in BEYOND_LAUNCH and virtual.outcome != "pass"
    return _launch_key(va, exact), _launch_key(vb, exact)


def _exact_value(verdict: VerdictRecord, name: str) -> Any:
    if name == "device":
        return verdict.device.identity() if verdict.device is not None else None
    if name == "outcome":
        return verdict.reported
    value = getattr(verdict, name)
    return getattr(value, "value", value)  # a Stage as its name


def _exact_text(verdict: VerdictRecord, names: Iterable[str]) -> str:
    parts = []
    for name in names:
        value = _exact_value(verdict, name)
        if name == "device" and value is not None:
            kind, device, arch, cc = value
            value = f"{kind}:{device} ({arch}, CC {cc})"
        parts.append(f"{name}={value!r}")
    return " ".join(parts)


def match_cases(a: ResultsDocument, b: ResultsDocument) -> tuple[dict[str, CaseEntry], dict[str, CaseEntry]]:
    """Each file's cases by a key the two share: the case id, or the matrix's file name and the id
    where a run judged one id in several matrices (in either file), so that no case hides behind
    another of the same id."""
    repeated: set[str] = set()
    for document in (a, b):
        counts = Counter(entry.id for entry in document.cases)
        repeated |= {case_id for case_id, n in counts.items() if n > 1}

    def keyed(document: ResultsDocument) -> dict[str, CaseEntry]:
        cases = {}
        for entry in document.cases:
            matrix = PurePath(entry.matrix).name if entry.matrix else "?"
            cases[f"{matrix}::{entry.id}" if entry.id in repeated else entry.id] = entry
        return cases

    return keyed(a), keyed(b)


def compare(a: ResultsDocument, b: ResultsDocument) -> Comparison:
    kinds_a, kinds_b = _device_kinds(a), _device_kinds(b)
    hardware_side = None
    if (kinds_a, kinds_b) == ({"hardware"}, {"virtual"}):
        hardware_side = "a"
    elif (kinds_a, kinds_b) == ({"virtual"}, {"hardware"}):
        hardware_side = "b"
    result = Comparison(hardware_side, {HARDWARE_VIRTUAL: 0, EXACT: 0})
    cases_a, cases_b = match_cases(a, b)
    result.only_a = sorted(cases_a.keys() - cases_b.keys())
    result.only_b = sorted(cases_b.keys() - cases_a.keys())
    for case_id in sorted(cases_a.keys() & cases_b.keys()):
        va, vb = cases_a[case_id].verdict, cases_b[case_id].verdict
        if va is None and vb is None:
            continue
        if va is None or vb is None:
            if hardware_side is not None:
                (result.judged_only_b if va is None else result.judged_only_a).append(case_id)
            else:
                text_a = "not judged" if va is None else f"outcome={va.reported!r}"
                text_b = "not judged" if vb is None else f"outcome={vb.reported!r}"
                result.disagreements.append(Disagreement(case_id, EXACT, text_a, text_b))
            continue
        if hardware_side is not None or {_kind(va), _kind(vb)} == {"hardware", "virtual"}:
            if hardware_side is not None:
                virtual_side: str | None = "b" if hardware_side == "a" else "a"
            else:
                virtual_side = {_kind(va): "a", _kind(vb): "b"}.get("virtual")
            ka, kb = _hardware_virtual_keys(va, vb, virtual_side)
            if ka == kb:
                result.agreeing[HARDWARE_VIRTUAL] += 1
                virtual = {"a": va, "b": vb}.get(virtual_side or "")
                result.unrun_agreeing += virtual is not None and virtual.unrun
            else:
                text_a, text_b = f"{ka[0]} smem={ka[1]}", f"{kb[0]} smem={kb[1]}"
                result.disagreements.append(Disagreement(case_id, HARDWARE_VIRTUAL, text_a, text_b))
            continue
        differing = [n for n in EXACT_FIELDS if _exact_value(va, n) != _exact_value(vb, n)]
        if not differing:
            result.agreeing[EXACT] += 1
        else:
            result.disagreements.append(
                Disagreement(case_id, EXACT, _exact_text(va, differing), _exact_text(vb, differing))
            )
    return result


def report_lines(result: Comparison, name_a: str, name_b: str) -> list[str]:
    """What ``report compare`` prints; the summary is the last line."""
    lines = [f"ONLY IN {name_a}: {case_id}" for case_id in result.only_a]
    lines += [f"ONLY IN {name_b}: {case_id}" for case_id in result.only_b]
    lines += [f"JUDGED ONLY IN {name_a}: {case_id}" for case_id in result.judged_only_a]
    lines += [f"JUDGED ONLY IN {name_b}: {case_id}" for case_id in result.judged_only_b]
    for d in result.disagreements:
        if d.mode == HARDWARE_VIRTUAL and result.hardware_side is not None:
            hardware, virtual = (d.a, d.b) if result.hardware_side == "a" else (d.b, d.a)
            lines.append(f"DISAGREE {d.case_id}: hardware {hardware} | virtual {virtual}")
        else:
            lines.append(f"DISAGREE {d.case_id}: {name_a} {d.a} | {name_b} {d.b}")
    total = result.compared
    agreeing = total - len(result.disagreements)
    modes = result.modes()
    if not modes:
        how = "no case was judged in both"
    elif modes == {HARDWARE_VIRTUAL}:
        how = "stage and shared memory requested"
    elif modes == {EXACT}:
        how = "exact: " + ", ".join(EXACT_FIELDS)
    else:
        how = f"{result.agreeing[HARDWARE_VIRTUAL]} hardware vs virtual, {result.agreeing[EXACT]} exact"
    unrun = f"; {result.unrun_agreeing} {UNRUN_AGREE}" if result.unrun_agreeing else ""
    lines.append(f"{agreeing}/{total} cases agree ({how}){unrun}")
    return lines
