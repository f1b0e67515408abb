"""``tileconform export-blocklist``: failing configurations as a FlashInfer tactics blocklist.

The file is the one ``flashinfer generate-tactics-blocklist`` writes (``TacticsBlocklist.save``
in ``flashinfer/tactics_blocklist.py``) and the autotuner loads from
``FLASHINFER_TACTICS_BLOCKLIST``::

    {"_metadata": {...environment..., "generated_at": ..., "generator_version": "1.0"},
     "invalid_tactics": {"trtllm::fused_moe::gemm1::MoERunner": [3, 11],
                         "trtllm::fused_moe::gemm2::MoERunner": [27, 28]}}

A tactic is an index into the ``MoERunner``'s tactic list (GEMM 1's tactics, then GEMM 2's),
which FlashInfer builds from ``CutlassMoeFCRunner::getTactics``. The tactics probe returns that
list for each dtype combination; every offered tactic whose configuration failed in a results
file (any verdict other than ``pass``) is blocked, in the GEMM whose list offers it. Because the
index depends on the runner, one file covers one dtype combination (FlashInfer keys the list by
custom op and runner class only). GEMM 2's list assumes ``use_fused_finalize=True`` (FlashInfer's
default).

Metadata: ``flashinfer_version`` comes from the results; the fields this tool cannot know (CUDA
of torch, cuBLAS, cuDNN, CuTe DSL) are ``"*"``, which FlashInfer's loader treats as matching any
environment. ``gpu`` is never a silent ``"*"``: FlashInfer would apply the list to every GPU,
and tactic ids index one architecture's tactic list, so on another architecture it would block
unrelated tactics. It is the name of the GPU that produced the hardware verdicts (the verdict's
structured ``device``, as ``torch.cuda.get_device_name()`` prints it, which FlashInfer compares).

Evidence: hardware verdicts, and build verdicts (a compile error holds on every GPU). Virtual
verdicts are judged through launch at most and on no GPU: they are used only when the caller
accepts that (``accept_virtual``). Without a hardware verdict nothing names the GPU, so a list
is written only when the caller accepts that too and names the GPU.

A tactic left out of a blocklist reads as usable. A configuration whose only passes are ``unrun``
(the kernel did not run: a virtual device, a compile-only run) is not known to work on any GPU,
so it is never left out silently: the metadata lists it under ``tileconform.unrun`` with its
tactics, and the command says how many there are.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ...commands.judged import keyed
from ...results.fingerprint import UNKNOWN, host_value
from ...results.model import CaseEntry, ResultsDocument, VerdictRecord
from ...verdict import UNRUN
from ..tactics.offered import Tactic
from .drift import ConfigKey, record_key, tactic_key

CUSTOM_OPS = {1: "trtllm::fused_moe::gemm1", 2: "trtllm::fused_moe::gemm2"}
RUNNER_CLASS = "MoERunner"
METADATA_KEY = "_metadata"
#: the keys FlashInfer's _collect_metadata() checks on load (flashinfer/autotuner/autotuner.py)
METADATA_FIELDS = (
    "flashinfer_version",
    "cuda_version",
    "cublas_version",
    "cudnn_version",
    "cudnn_frontend_version",
    "cutlass_dsl_version",
    "gpu",
)
WILDCARD = "*"


class BlocklistError(ValueError):
    pass


@dataclass(frozen=True)
class Blocked:
    key: ConfigKey
    case_ids: tuple[str, ...]
    outcomes: tuple[str, ...]
    tactics: tuple[tuple[int, int], ...]  # (gemm, tactic id)


@dataclass(frozen=True)
class Unrun:
    """A configuration that passed only without its kernel running: not blocked, not known good."""

    key: ConfigKey
    case_ids: tuple[str, ...]
    tactics: tuple[tuple[int, int], ...]  # (gemm, tactic id); empty when no tactic offers it


@dataclass
class Export:
    document: dict[str, Any]
    blocked: list[Blocked]
    not_offered: list[tuple[ConfigKey, tuple[str, ...]]]  # failing, but no tactic stands for it
    unused: int = 0  # virtual verdicts left out (not accepted)
    unrun: list[Unrun] = field(default_factory=list)


class RunnerKey(Protocol):
    """What a backend keys a failing configuration by: ordered, hashable, of one runner (its
    dtypes label), as a blocklist holds the ids of one runner."""

    @property
    def dtypes(self) -> str: ...

    def __lt__(self, other: Any, /) -> bool: ...

    def __hash__(self) -> int: ...


K = TypeVar("K", bound=RunnerKey)


@dataclass
class Evidence(Generic[K]):
    """The verdicts of one arch in the results files, as far as they are used."""

    failing: dict[K, list[tuple[str, str]]] = field(default_factory=dict)  # -> (case, outcome)
    ran: set[K] = field(default_factory=set)  # passed with the kernel run
    unrun: dict[K, list[str]] = field(default_factory=dict)  # passed, kernel not run -> cases
    versions: set[str] = field(default_factory=set)  # FlashInfer versions of the used verdicts
    gpus: set[str] = field(default_factory=set)  # names of the GPUs of the hardware verdicts
    hardware: int = 0
    build: int = 0  # decided before any device (code generation, nvcc, compile only)
    virtual: int = 0  # used or not

    def failing_of(self, dtypes: str | None) -> list[K]:
        """The failing configurations of the runner of ``dtypes``, in order."""
        return sorted(k for k in self.failing if k.dtypes == dtypes)

    def unrun_of(self, dtypes: str | None) -> list[K]:
        """The configurations of ``dtypes`` (None: of every runner) that passed only without their
        kernel running, in order: not blocked, and not known to work on any GPU."""
        return [
            k
            for k in sorted(self.unrun)
            if k.dtypes == (dtypes or k.dtypes) and k not in self.failing and k not in self.ran
        ]


def gather(
    judged: Iterable[tuple[ResultsDocument, CaseEntry, VerdictRecord, K]], *, accept_virtual: bool
) -> Evidence[K]:
    """The evidence of ``judged`` (the judged entries of an arch, with their key:
    :func:`...commands.judged.keyed`): hardware and build verdicts, virtual ones if
    ``accept_virtual``."""
    evidence: Evidence[K] = Evidence()
    for document, entry, verdict, key in judged:
        device = verdict.device
        if device is not None and device.kind == "hardware":
            evidence.gpus.add(device.name)
            evidence.hardware += 1
        elif device is not None and device.kind == "virtual":
            evidence.virtual += 1
            if not accept_virtual:
                continue
        else:
            evidence.build += 1
        flashinfer = host_value(verdict, document.host, "flashinfer")
        if flashinfer != UNKNOWN:
            evidence.versions.add(flashinfer)
        if verdict.outcome != "pass":
            evidence.failing.setdefault(key, []).append((entry.id, verdict.outcome))
        elif verdict.unrun:
            evidence.unrun.setdefault(key, []).append(entry.id)
        else:
            evidence.ran.add(key)
    return evidence


def gpu_of(evidence: Evidence[Any], arch: str, gpu: str | None, *, accept_virtual: bool) -> str:
    """The GPU the blocklist is for, or why there is none to write it for."""
    if not (evidence.hardware or evidence.build or evidence.virtual):
        raise BlocklistError(f"no verdict for {arch} in these results files")
    if not evidence.hardware and not accept_virtual:
        raise BlocklistError(
            f"no verdict for {arch} in these results files is from a GPU ({evidence.virtual} "
            f"virtual-device, {evidence.build} build-only): judged through launch at most. A "
            "blocklist from them would block tactics no GPU was seen to fail, for a GPU none of "
            "them names. Run the matrix on the GPU, or pass --accept-virtual (and --gpu NAME) to "
            "accept launch-only evidence"
        )
    if len(evidence.gpus) > 1:
        raise BlocklistError(
            f"hardware results from several GPUs ({', '.join(sorted(evidence.gpus))}): export one"
        )
    if evidence.gpus:
        judged = next(iter(evidence.gpus))
        if gpu is not None and gpu != judged:
            raise BlocklistError(
                f"--gpu {gpu!r}, but the hardware verdicts are from {judged!r}: a blocklist is for "
                "the GPU that was judged (FlashInfer compares the name exactly)"
            )
        return judged
    if gpu is None:
        raise BlocklistError(
            f"virtual and build verdicts name no GPU: give --gpu NAME, the {arch} GPU the list is "
            "for as torch.cuda.get_device_name() prints it ('*' applies it to every GPU of every "
            "architecture, where its tactic ids mean other tactics)"
        )
    return gpu


@dataclass(frozen=True)
class Request(Generic[K]):
    """What the results and the caller ask for: checked before FlashInfer's tactics are fetched
    (the probe may have to be compiled first), so that a list that cannot be written fails fast."""

    arch: str
    evidence: Evidence[K]
    gpu: str
    dtypes: str | None
    accept_virtual: bool

    @property
    def unused(self) -> int:
        """Virtual verdicts left out (not accepted)."""
        return 0 if self.accept_virtual else self.evidence.virtual


def request(
    results: Sequence[ResultsDocument],
    arch: str,
    *,
    dtypes: str | None,
    gpu: str | None,
    accept_virtual: bool = False,
) -> Request[ConfigKey]:
    judged = keyed(results, arch, lambda case: record_key(case, arch))
    evidence = gather(judged, accept_virtual=accept_virtual)
    return request_of(evidence, arch, dtypes=dtypes, gpu=gpu, accept_virtual=accept_virtual)


def request_of(
    evidence: Evidence[K], arch: str, *, dtypes: str | None, gpu: str | None, accept_virtual: bool
) -> Request[K]:
    """The list ``evidence`` can give: for one GPU, one runner (``dtypes``, or the one whose
    configurations failed), one FlashInfer version."""
    gpu = gpu_of(evidence, arch, gpu, accept_virtual=accept_virtual)
    runners = sorted({k.dtypes for k in evidence.failing})
    if dtypes is None:
        if len(runners) > 1:
            raise BlocklistError(
                f"failures of {len(runners)} dtype combinations ({', '.join(runners)}): a FlashInfer "
                "blocklist holds tactic ids of one runner; choose one with --dtype"
            )
        dtypes = runners[0] if runners else None
    versions = evidence.versions
    if len(versions) > 1:
        raise BlocklistError(f"results from several FlashInfer versions ({', '.join(sorted(versions))})")
    return Request(arch, evidence, gpu, dtypes, accept_virtual)


def blocklist(
    wanted: Request[Any],
    invalid: dict[str, set[int]],
    blocked: list[dict[str, Any]],
    unrun: list[dict[str, Any]],
    **described: Any,
) -> dict[str, Any]:
    """The file: ``invalid`` (runner key -> tactic ids) and its metadata, FlashInfer's fields (what
    this tool cannot know ``"*"``) and, under ``tileconform`` (not read by FlashInfer), where the
    list came from: ``described`` (what the backend's ids assume), what the failures were seen on,
    the failing configurations it blocks and those that passed only unrun."""
    evidence = wanted.evidence
    metadata: dict[str, Any] = dict.fromkeys(METADATA_FIELDS, WILDCARD)
    if evidence.versions:
        metadata["flashinfer_version"] = next(iter(evidence.versions))
    metadata["gpu"] = wanted.gpu
    metadata["generated_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
    metadata["generator_version"] = "1.0"
    metadata["tileconform"] = {
        "arch": wanted.arch,
        "dtypes": wanted.dtypes,
        **described,
        # what the failures were seen on: hardware verdicts, and launch-only ones if accepted
        "verdicts": {
            "hardware": evidence.hardware,
            "build": evidence.build,
            "virtual": evidence.virtual if wanted.accept_virtual else 0,
        },
        "blocked": blocked,
        # passed only where the kernel did not run: not blocked, and not known to work on the GPU
        UNRUN: unrun,
    }
    return {
        METADATA_KEY: metadata,
        "invalid_tactics": {name: sorted(ids) for name, ids in sorted(invalid.items())},
    }


def export_for(tactics: Sequence[Tactic], wanted: Request[ConfigKey]) -> Export:
    """The blocklist of ``wanted``'s failing configurations among ``tactics``."""
    evidence, dtypes = wanted.evidence, wanted.dtypes
    failing = evidence.failing
    offered: dict[ConfigKey, list[tuple[int, int]]] = {}
    for t in tactics:  # with nothing failing (no runner chosen), every runner's: for the unrun list
        if t.tma_ws and t.runner == (dtypes or t.runner):
            offered.setdefault(tactic_key(t), []).append((t.gemm, t.tactic))
    blocked, not_offered = [], []
    for key in evidence.failing_of(dtypes):
        ids = tuple(sorted(offered.get(key, [])))
        cases = tuple(case for case, _ in failing[key])
        if ids:
            blocked.append(Blocked(key, cases, tuple(o for _, o in failing[key]), ids))
        else:
            not_offered.append((key, cases))
    invalid: dict[str, set[int]] = {}
    for item in blocked:
        for gemm, tactic in item.tactics:
            invalid.setdefault(f"{CUSTOM_OPS[gemm]}::{RUNNER_CLASS}", set()).add(tactic)
    unrun = [
        Unrun(key, tuple(sorted(evidence.unrun[key])), tuple(sorted(offered.get(key, []))))
        for key in evidence.unrun_of(dtypes)
    ]
    document = blocklist(
        wanted,
        invalid,
        [
            {"case_ids": list(b.case_ids), "outcomes": list(b.outcomes), "tactics": [t for _, t in b.tactics]}
            for b in blocked
        ],
        [
            {"dtypes": u.key.dtypes, "case_ids": list(u.case_ids), "tactics": [t for _, t in u.tactics]}
            for u in unrun
        ],
        use_fused_finalize=True,
    )
    return Export(document, blocked, not_offered, wanted.unused, unrun)


def dumps(document: dict[str, Any]) -> str:
    """As TacticsBlocklist.save writes it (``json.dump(..., indent=2)``)."""
    return json.dumps(document, indent=2) + "\n"
