"""``tileconform export-blocklist --dense``: failing dense tactics as a FlashInfer tactics blocklist.

The file is the MoE export's (:mod:`...flashinfer.commands.blocklist`: same metadata, same rules
for the GPU it is for and for virtual evidence); its keys are ``<custom op>::<runner class>``,
every custom op FlashInfer tunes the runner under (``fp4_gemm::CutlassFp4GemmRunner``; the bf16
runner also under ``bf16_gemm_pdl_auto``), and its ids are the runner's ``getConfigs()`` indexes
(:mod:`..runners`). FlashInfer keys a list by op and runner class only, not by output type, so a
file covers one dtype combination, as the MoE export does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...flashinfer.commands.blocklist import (
    METADATA_FIELDS,
    METADATA_KEY,
    WILDCARD,
    BlocklistError,
    Evidence,
    gpu_of,
)
from ...results.fingerprint import UNKNOWN, host_value
from ...results.model import ResultsDocument
from ...verdict import UNRUN
from ..runners import Runner
from .verdicts import Key, judged, tactic_key


@dataclass
class DenseEvidence:
    """The dense verdicts of one arch, as far as they are used."""

    failing: dict[Key, list[tuple[str, str]]] = field(default_factory=dict)  # -> (case, outcome)
    ran: set[Key] = field(default_factory=set)
    unrun: dict[Key, list[str]] = field(default_factory=dict)
    counts: Evidence = field(
        default_factory=Evidence
    )  # devices, versions and GPUs, as the MoE export counts them


def gather(results: Sequence[ResultsDocument], arch: str, *, accept_virtual: bool) -> DenseEvidence:
    found = DenseEvidence()
    counts = found.counts
    for document, entry, verdict, key in judged(results, arch):
        device = verdict.device
        if device is not None and device.kind == "hardware":
            counts.gpus.add(device.name)
            counts.hardware += 1
        elif device is not None and device.kind == "virtual":
            counts.virtual += 1
            if not accept_virtual:
                continue
        else:
            counts.build += 1
        version = host_value(verdict, document.host, "flashinfer")
        if version != UNKNOWN:
            counts.versions.add(version)
        if verdict.outcome != "pass":
            found.failing.setdefault(key, []).append((entry.id, verdict.outcome))
        elif verdict.unrun:
            found.unrun.setdefault(key, []).append(entry.id)
        else:
            found.ran.add(key)
    return found


@dataclass(frozen=True)
class Export:
    document: dict[str, Any]
    blocked: int  # failing configurations a tactic stands for
    not_offered: list[tuple[str, ...]]  # case ids failing where no tactic stands for their configuration
    unused: int  # virtual verdicts left out (not accepted)
    unrun: int  # configurations that passed only without their kernel running


def export(
    results: Sequence[ResultsDocument],
    arch: str,
    runners: Sequence[Runner],
    *,
    dtypes: str | None,
    gpu: str | None,
    accept_virtual: bool,
) -> Export:
    evidence = gather(results, arch, accept_virtual=accept_virtual)
    counts = evidence.counts
    gpu = gpu_of(counts, arch, gpu, accept_virtual=accept_virtual)
    labels = sorted({k.dtypes for k in evidence.failing})
    if dtypes is None:
        if len(labels) > 1:
            raise BlocklistError(
                f"dense failures of {len(labels)} dtype combinations ({', '.join(labels)}): a FlashInfer "
                "blocklist holds tactic ids of one runner; choose one with --dtype"
            )
        dtypes = labels[0] if labels else None
    if len(counts.versions) > 1:
        raise BlocklistError(
            f"results from several FlashInfer versions ({', '.join(sorted(counts.versions))})"
        )
    offered: dict[Key, list[tuple[Runner, int]]] = {}
    for runner in runners:
        for label in runner.labels():
            for t in runner.family.tactics:
                offered.setdefault(tactic_key(label, t), []).append((runner, t.index))
    invalid: dict[str, set[int]] = {}
    blocked, not_offered = [], []
    for key in sorted(k for k in evidence.failing if k.dtypes == dtypes):
        cases = tuple(case for case, _ in evidence.failing[key])
        if key not in offered:
            not_offered.append(cases)
            continue
        ids = sorted({i for _, i in offered[key]})
        for runner, index in offered[key]:
            for name in runner.blocklist_keys:
                invalid.setdefault(name, set()).add(index)
        blocked.append(
            {"case_ids": list(cases), "outcomes": [o for _, o in evidence.failing[key]], "tactics": ids}
        )
    unrun = [
        {
            "dtypes": key.dtypes,
            "case_ids": sorted(evidence.unrun[key]),
            "tactics": sorted({i for _, i in offered.get(key, [])}),
        }
        for key in sorted(evidence.unrun)
        if key.dtypes == (dtypes or key.dtypes) and key not in evidence.failing and key not in evidence.ran
    ]
    metadata: dict[str, Any] = dict.fromkeys(METADATA_FIELDS, WILDCARD)
    if counts.versions:
        metadata["flashinfer_version"] = next(iter(counts.versions))
    metadata["gpu"] = gpu
    metadata["generated_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
    metadata["generator_version"] = "1.0"
    metadata["tileconform"] = {
        "arch": arch,
        "dtypes": dtypes,
        "runners": sorted({r.family.module for r in runners}),
        "verdicts": {
            "hardware": counts.hardware,
            "build": counts.build,
            "virtual": counts.virtual if accept_virtual else 0,
        },
        "blocked": blocked,
        UNRUN: unrun,
    }
    document = {
        METADATA_KEY: metadata,
        "invalid_tactics": {name: sorted(ids) for name, ids in sorted(invalid.items())},
    }
    return Export(document, len(blocked), not_offered, 0 if accept_virtual else counts.virtual, len(unrun))
