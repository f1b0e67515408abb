"""Which ``cutlass_fused_moe`` tactics a pasted line of FlashInfer's autotuner names.

Users meet these tactics as integers in the forms FlashInfer 0.7.4 writes them
(``flashinfer/autotuner/autotuner.py``):

- a config-cache entry (``autotune_configs.json``, ``AutoTuner.save_configs``): the key names the
  custom op, the value the runner class and the id:
  ``"('trtllm::fused_moe::gemm2', 'MoERunner', ((8, 7168), ...), (...))": ["MoERunner", 17, ...]``,
  or the value alone, ``["MoERunner", 17]``;
- a log line printing the runner object and the id: ``[Autotuner]: Skipping tactic <flashinfer.
  fused_moe.core...MoERunner object at 0x7c70ccce8350> 15, due to failure while profiling: ...``
  (also ``profiling <...> 15, shapes=...`` and ``profiling chosen runner: <...> 15 for
  ProfilingCacheKey(custom_op='trtllm::fused_moe::gemm1', ...)``);
- a tactics-blocklist entry (``FLASHINFER_TACTICS_BLOCKLIST``):
  ``"trtllm::fused_moe::gemm1::MoERunner": [3, 11]``;
- a bare id, ``17``.

The GEMM comes from the custom op (``trtllm::fused_moe::gemm1`` / ``gemm2``) when the line names
it; ``-1`` is FlashInfer's default tactic of that GEMM. A cache entry's key ends with the runner's
extras (``MoERunner.get_cache_key_extras``), whose last element is ``use_fused_finalize``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the most characters of pasted text read (an autotune_configs.json of a few thousand entries)
MAX_TEXT = 4 * 1024 * 1024

_GEMM = re.compile(r"fused_moe::gemm([12])\b")
_ID = r"(-1|\d{1,9})"
_SINGLE = (
    re.compile(r"""["']MoERunner["']\s*,\s*""" + _ID + r"\b"),  # ["MoERunner", 17
    re.compile(r"MoERunner object at 0x[0-9a-fA-F]+>\s+" + _ID + r"\b"),  # <... object at 0x..> 15
    re.compile(r"^\s*" + _ID + r"\s*$"),  # 17
)
_FINALIZE = re.compile(r"""\b(True|False)\)\)["']\s*:\s*\[""")  # ..., True))": [
_LIST = re.compile(r"""::MoERunner["']\s*:\s*\[([-\d,\s]*)\]""")  # "...::MoERunner": [3, 11]


class LineError(ValueError):
    """Pasted text that names no MoERunner tactic, or names one ambiguously."""


@dataclass(frozen=True)
class Mention:
    """The tactics one line names: the GEMM when the line says it, and the ids as written."""

    line: int  # 1-based, in the pasted text
    gemm: int | None
    ids: tuple[int, ...]
    fused_finalize: bool | None = None  # a cache entry's use_fused_finalize


def _ids(text: str) -> tuple[int, ...]:
    found = _LIST.search(text)
    if found:
        return tuple(int(v) for v in re.findall(r"-?\d+", found.group(1)))
    for pattern in _SINGLE:
        match = pattern.search(text)
        if match:
            return (int(match.group(1)),)
    return ()


def mentions(text: str) -> list[Mention]:
    """Every line of ``text`` that names MoERunner tactics, in order. A line naming both GEMMs is
    a :class:`LineError` (which of them its id belongs to cannot be told), and so is text in
    which no line names a tactic."""
    if len(text) > MAX_TEXT:
        raise LineError(f"the pasted text has {len(text)} characters; at most {MAX_TEXT} are read")
    found = []
    for number, line in enumerate(text.splitlines() or [text], start=1):
        ids = _ids(line)
        if not ids:
            continue
        gemms = {int(g) for g in _GEMM.findall(line)}
        if len(gemms) > 1:
            raise LineError(f"line {number} names both fused_moe::gemm1 and gemm2: paste one entry")
        finalize = _FINALIZE.search(line)
        fused = None if finalize is None else finalize.group(1) == "True"
        found.append(Mention(number, gemms.pop() if gemms else None, ids, fused))
    if not found:
        start = text.strip().splitlines()[0][:120] if text.strip() else "(empty)"
        raise LineError(
            "no MoERunner tactic in the pasted text (an autotune_configs.json entry "
            '\'"(...fused_moe::gemm2...)": ["MoERunner", 17]\', a log line \'... MoERunner object at '
            "0x...> 17 ...', a blocklist entry '\"trtllm::fused_moe::gemm1::MoERunner\": [3, 11]' or "
            f"a bare id): {start}"
        )
    return found
