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

Metadata: ``flashinfer_version`` and ``gpu`` come from the results (the GPU name of hardware
verdicts; ``--gpu`` for virtual ones); the fields this tool cannot know (CUDA of torch, cuBLAS,
cuDNN, CuTe DSL) are ``"*"``, which FlashInfer's loader treats as matching any environment.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..flashinfer.tactics import Tactic
from ..results.fingerprint import UNKNOWN, device_key
from ..results.model import ResultsDocument
from .drift import ConfigKey, case_config_key, tactic_key

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


@dataclass
class Export:
    document: dict[str, Any]
    blocked: list[Blocked]
    not_offered: list[tuple[ConfigKey, tuple[str, ...]]]  # failing, but no tactic stands for it


def failing_configs(
    results: Sequence[ResultsDocument], arch: str
) -> tuple[dict[ConfigKey, list[tuple[str, str]]], set[str], set[str]]:
    """(failing config -> [(case id, outcome)], flashinfer versions, GPU names of hardware rows)."""
    failing: dict[ConfigKey, list[tuple[str, str]]] = {}
    versions: set[str] = set()
    gpus: set[str] = set()
    for document in results:
        for entry, verdict in document.judged():
            if entry.case is None or entry.case.arch != arch:
                continue
            device = device_key(verdict, document.host)
            if device.flashinfer != UNKNOWN:
                versions.add(device.flashinfer)
            if device.kind == "hardware":
                gpus.add(device.device)
            if verdict.outcome != "pass":
                failing.setdefault(case_config_key(entry.case, arch), []).append((entry.id, verdict.outcome))
    return failing, versions, gpus


def build_export(
    tactics: Sequence[Tactic],
    results: Sequence[ResultsDocument],
    arch: str,
    *,
    dtypes: str | None,
    gpu: str | None,
) -> Export:
    failing, versions, gpus = failing_configs(results, arch)
    runners = sorted({k.dtypes for k in failing})
    if dtypes is None:
        if len(runners) > 1:
            raise BlocklistError(
                f"failures of {len(runners)} dtype combinations ({', '.join(runners)}): a FlashInfer "
                "blocklist holds tactic ids of one runner; choose one with --dtype"
            )
        dtypes = runners[0] if runners else None
    if len(versions) > 1:
        raise BlocklistError(f"results from several FlashInfer versions ({', '.join(sorted(versions))})")
    if len(gpus) > 1:
        raise BlocklistError(f"hardware results from several GPUs ({', '.join(sorted(gpus))}): export one")
    offered: dict[ConfigKey, list[tuple[int, int]]] = {}
    for t in tactics:
        if t.tma_ws and t.runner == dtypes:
            offered.setdefault(tactic_key(t), []).append((t.gemm, t.tactic))
    blocked, not_offered = [], []
    for key in sorted(k for k in failing if k.dtypes == dtypes):
        ids = tuple(sorted(offered.get(key, [])))
        cases = tuple(case for case, _ in failing[key])
        if ids:
            blocked.append(Blocked(key, cases, tuple(o for _, o in failing[key]), ids))
        else:
            not_offered.append((key, cases))
    invalid: dict[str, list[int]] = {}
    for item in blocked:
        for gemm, tactic in item.tactics:
            invalid.setdefault(f"{CUSTOM_OPS[gemm]}::{RUNNER_CLASS}", []).append(tactic)
    metadata: dict[str, Any] = dict.fromkeys(METADATA_FIELDS, WILDCARD)
    if versions:
        metadata["flashinfer_version"] = versions.pop()
    if gpu is not None:
        metadata["gpu"] = gpu
    elif gpus:
        metadata["gpu"] = next(iter(gpus))
    metadata["generated_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
    metadata["generator_version"] = "1.0"
    # not read by FlashInfer: where the list came from
    metadata["tileconform"] = {
        "arch": arch,
        "dtypes": dtypes,
        "use_fused_finalize": True,
        "blocked": [
            {"case_ids": list(b.case_ids), "outcomes": list(b.outcomes), "tactics": [t for _, t in b.tactics]}
            for b in blocked
        ],
    }
    document = {
        METADATA_KEY: metadata,
        "invalid_tactics": {k: sorted(set(v)) for k, v in sorted(invalid.items())},
    }
    return Export(document, blocked, not_offered)


def dumps(document: dict[str, Any]) -> str:
    """As TacticsBlocklist.save writes it (``json.dump(..., indent=2)``)."""
    return json.dumps(document, indent=2) + "\n"
