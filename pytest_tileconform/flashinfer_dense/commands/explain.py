"""Which dense tactics a pasted line of FlashInfer's autotuner names (``tactics --dense --explain``).

The forms are those of the MoE runner's lines (:mod:`...flashinfer.tactics.autotuner_lines`) with
a dense runner class in place of ``MoERunner``, the classes being the ones ``gemm_base.py``
defines (:mod:`..runners`): a config-cache value ``["CutlassFp4GemmRunner", 5]``, a log line
``<...CutlassFp4GemmRunner object at 0x7f...> 5``, a blocklist entry
``"fp4_gemm::CutlassFp4GemmRunner": [3, 11]``, or a bare id (every runner ``--dtype`` selects).
``-1`` is the runner's default, as its binding (``csrc/<module>.cu``) says: an id put in its place
(``if (tactic == -1) { tactic = 0; }``) or a configuration built in its place (SM120 fp4:
``(tactic >= 0) ? ... : CutlassGemmConfig(CtaShape128x128x128B, ..., ClusterShape_1x1x1, false)``),
which is the id of the tactic that builds the same one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..runners import Runner

_ID = r"(-1|\d{1,9})"
_DEFAULT = re.compile(r"if\s*\(\s*tactic\s*==\s*-1\s*\)\s*\{\s*tactic\s*=\s*(\d+)\s*;")
_BUILT = re.compile(
    r"\(\s*tactic\s*>=\s*0\s*\)\s*\?[^:;]*:\s*CutlassGemmConfig\(\s*CutlassTileConfigSM\d+::(\w+)"
    r"[^;]*?ClusterShape::ClusterShape_(\d+)x(\d+)x(\d+)\s*"
    r"(?:,\s*(?:/\*\s*swap_ab\s*\*/\s*)?(true|false))?(?:\s*,\s*(?:/\*[^*]*\*/\s*)?(true|false))?\s*\)"
)


class ExplainError(ValueError):
    """Pasted text that names no dense tactic."""


@dataclass(frozen=True)
class Mention:
    line: int  # 1-based
    runner_class: str | None  # None: a bare id
    ids: tuple[int, ...]


def mentions(text: str, classes: Iterable[str]) -> list[Mention]:
    """The dense tactics each line of ``text`` names (lines naming none are skipped)."""
    names = "|".join(re.escape(c) for c in sorted(set(classes), key=len, reverse=True))
    if not names:
        raise ExplainError("no dense runner class to look for")
    listed = re.compile(rf"""::({names})["']\s*:\s*\[([-\d,\s]*)\]""")
    single = (
        re.compile(rf"""["']({names})["']\s*,\s*{_ID}\b"""),
        re.compile(rf"({names}) object at 0x[0-9a-fA-F]+>\s+{_ID}\b"),
    )
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        hit = listed.search(line)
        if hit:
            found.append(Mention(number, hit[1], tuple(int(v) for v in re.findall(r"-?\d+", hit[2]))))
            continue
        for pattern in single:
            hit = pattern.search(line)
            if hit:
                found.append(Mention(number, hit[1], (int(hit[2]),)))
                break
        else:
            bare = re.fullmatch(rf"\s*{_ID}\s*", line)
            if bare:
                found.append(Mention(number, None, (int(bare[1]),)))
    if not found:
        raise ExplainError(f"no line names a tactic of {names.replace('|', ', ')} (or is a bare id)")
    return found


def default_id(csrc: Path, runner: Runner) -> int | None:
    """The id the runner's binding runs for ``-1``, None when its binding does not say."""
    binding = csrc / f"{runner.family.module}.cu"
    text = re.sub(r"//[^\n]*", "", binding.read_text()) if binding.is_file() else ""
    given = _DEFAULT.search(text)
    if given:
        return int(given[1])
    built = _BUILT.search(text)
    if built is None:
        return None
    cluster = (int(built[2]), int(built[3]), int(built[4]))
    config = (built[1], cluster, built[5] == "true", built[6] == "true")
    same = [t.index for t in runner.family.tactics if (t.tile, t.cluster, t.swap_ab, t.stream_k) == config]
    return same[0] if same else None


def resolve(mention: Mention, runner: Runner, default: int | None) -> tuple[list[int], list[str]]:
    """The ids of ``runner`` that ``mention`` names, and why any is not one."""
    count = len(runner.family.tactics)
    ids, problems = [], []
    for wanted in mention.ids:
        if wanted == -1:
            if default is None:
                problems.append(f"-1: {runner.family.module}'s binding does not say what it runs for -1")
            else:
                ids.append(default)
        elif 0 <= wanted < count:
            ids.append(wanted)
        else:
            problems.append(
                f"{wanted} is not an id of {runner.runner_class} here ({runner.family.module}: 0-{count - 1})"
            )
    return ids, problems
