"""``tileconform export-blocklist --dense``: failing dense tactics as a FlashInfer tactics blocklist.

The file is the MoE export's (:mod:`...flashinfer.commands.blocklist`: same metadata, same rules
for the GPU it is for and for virtual evidence); its keys are ``<custom op>::<runner class>``,
every custom op FlashInfer tunes the runner under (``fp4_gemm::CutlassFp4GemmRunner``; the bf16
runner also under ``bf16_gemm_pdl_auto``), and its ids are the runner's ``getConfigs()`` indexes
(:mod:`..runners`). FlashInfer keys a list by op and runner class only, not by output type, so a
file covers one dtype combination, as the MoE export does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...flashinfer.commands.blocklist import blocklist, gather, request_of
from ...results.model import ResultsDocument
from ..runners import Runner
from .verdicts import Key, judged, tactic_key


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
    evidence = gather(judged(results, arch), accept_virtual=accept_virtual)
    wanted = request_of(evidence, arch, dtypes=dtypes, gpu=gpu, accept_virtual=accept_virtual)
    offered: dict[Key, list[tuple[Runner, int]]] = {}
    for runner in runners:
        for label in runner.labels():
            for t in runner.family.tactics:
                offered.setdefault(tactic_key(label, t), []).append((runner, t.index))
    invalid: dict[str, set[int]] = {}
    blocked, not_offered = [], []
    for key in evidence.failing_of(wanted.dtypes):
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
        for key in evidence.unrun_of(wanted.dtypes)
    ]
    runner_modules = sorted({r.family.module for r in runners})
    document = blocklist(wanted, invalid, blocked, unrun, runners=runner_modules)
    return Export(document, len(blocked), not_offered, wanted.unused, len(unrun))
