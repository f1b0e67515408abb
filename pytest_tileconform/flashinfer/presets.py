"""Named problems from real MoE models (presets), and the seeded routing that gives their rows.

A matrix may name a problem instead of listing its rows: ``problems: [dsv3-decode,
qwen3-gemm2-prefill4k]``. A preset is one grouped GEMM of one MoE layer of a public model at one
token count::

    MODEL-gemmG-PHASESIZE      e.g. dsv3-gemm1-decode1, gptoss-gemm2-prefill16k

- ``MODEL``: ``dsv3`` (DeepSeek-V3), ``qwen3`` (Qwen3-30B-A3B), ``gptoss`` (gpt-oss-120b),
  ``mixtral`` (Mixtral-8x7B); the figures are the models' ``config.json`` values (:data:`MODELS`).
- ``gemm1``: gate/up (FlashInfer's fc1), ``n = 2 x intermediate`` (the gated activations FlashInfer's
  CUTLASS MoE computes from one GEMM), ``k = hidden``; FlashInfer runs it without epilogue fusion.
  ``gemm2``: down (fc2), ``n = hidden``, ``k = intermediate``; FlashInfer runs it with the
  ``finalize`` fusion. The matrix's ``fusion`` axis still decides what a case runs.
- ``PHASESIZE``: tokens in the batch: ``decode1``, ``decode16``, ``decode64``, ``prefill4k``
  (4,096), ``prefill16k`` (16,384).

A name that leaves out the size, the GEMM or both names every preset it leaves open:
``dsv3-gemm1-decode`` (3), ``dsv3-prefill16k`` (both GEMMs, 2), ``dsv3-decode`` (6),
``dsv3-gemm2`` (5), ``dsv3`` (10).

Rows per expert are not written down: they are the counts of a routing of ``tokens`` tokens to
``top_k`` distinct experts each, drawn by :func:`route` from the problem's ``seed`` (default 0)
with SplitMix64, integer arithmetic only, so every platform and Python version gets the same rows.
The routing is skewed on purpose: the first, middle and last experts get no token (empty experts at
the start, middle and end of the grouped problem) and the others are chosen with Zipf weights, so a
few hot experts take most tokens. A preset's rows are shown by ``describe_presets``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

MASK64 = (1 << 64) - 1
#: The largest seed (SplitMix64's state is 64 bits).
MAX_SEED = MASK64


class SplitMix64:
    """Steele, Lea and Flood's SplitMix64 (OOPSLA 2014; the generator Java's SplittableRandom
    and the xoshiro authors' seeding use): a 64-bit state advanced by the golden-ratio constant
    and mixed by two multiply-xorshift rounds. Integer arithmetic only: the same numbers
    everywhere."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        """The next 64-bit output."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """An integer in ``[0, bound)``: the next output modulo ``bound`` (the bias, under
        ``bound / 2**64``, does not matter for a test problem; being defined does)."""
        return self.next() % bound


#: Zipf weight of the expert of rank 1; rank r weighs ``ZIPF_TOP // r``.
ZIPF_TOP = 1 << 32


def empty_experts(experts: int) -> tuple[int, ...]:
    """The experts a preset's routing never picks: first, middle and last."""
    return tuple(sorted({0, experts // 2, experts - 1}))


@lru_cache(maxsize=64)
def route(experts: int, tokens: int, top_k: int, seed: int) -> tuple[int, ...]:
    """Rows per expert of ``tokens`` tokens, each routed to ``top_k`` distinct experts.

    With ``rng = SplitMix64(seed)``: the experts other than :func:`empty_experts` are put in a
    random order (Fisher-Yates, from the last position down, swapping with ``rng.below(i + 1)``);
    the expert at rank ``r`` (1-based) weighs ``2**32 // r``. Each token then draws
    ``u = rng.below(total weight)`` and takes the expert whose cumulative weight range holds
    ``u``, again until it has ``top_k`` distinct experts. Every count is at most ``tokens``
    and they sum to ``tokens * top_k``.
    """
    live = [e for e in range(experts) if e not in empty_experts(experts)]
    if top_k > len(live):
        raise ValueError(f"top_k={top_k} is more than the {len(live)} experts a routing may pick")
    rng = SplitMix64(seed)
    for i in range(len(live) - 1, 0, -1):
        j = rng.below(i + 1)
        live[i], live[j] = live[j], live[i]
    cumulative, total = [], 0
    for rank in range(1, len(live) + 1):
        total += ZIPF_TOP // rank
        cumulative.append(total)
    counts = [0] * experts
    for _ in range(tokens):
        chosen: set[int] = set()
        while len(chosen) < top_k:
            chosen.add(live[bisect_right(cumulative, rng.below(total))])
        for expert in chosen:
            counts[expert] += 1
    return tuple(counts)


@dataclass(frozen=True)
class Model:
    """One MoE layer's shape, from the model's ``config.json``."""

    key: str  #: the MODEL part of preset names
    title: str
    hidden: int  #: hidden_size
    intermediate: int  #: the expert's intermediate size (moe_intermediate_size or intermediate_size)
    experts: int  #: routed experts
    top_k: int  #: experts per token
    bias: bool  #: the experts' linear layers have a bias


MODELS = (
    Model("dsv3", "DeepSeek-V3", hidden=7168, intermediate=2048, experts=256, top_k=8, bias=False),
    Model("qwen3", "Qwen3-30B-A3B", hidden=2048, intermediate=768, experts=128, top_k=8, bias=False),
    Model("gptoss", "gpt-oss-120b", hidden=2880, intermediate=2880, experts=128, top_k=4, bias=True),
    Model("mixtral", "Mixtral-8x7B", hidden=4096, intermediate=14336, experts=8, top_k=2, bias=False),
)
#: Tokens per batch of each phase: decode from one token to 64, prefill 4k and 16k.
PHASES = {"decode": (1, 16, 64), "prefill": (4096, 16384)}
GEMMS = (1, 2)


def _size_label(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


@dataclass(frozen=True)
class Preset:
    """One named problem: a model's GEMM at a token count, before its routing is drawn."""

    name: str
    model: Model
    gemm: int
    phase: str
    tokens: int

    @property
    def n(self) -> int:
        return 2 * self.model.intermediate if self.gemm == 1 else self.model.hidden

    @property
    def k(self) -> int:
        return self.model.hidden if self.gemm == 1 else self.model.intermediate

    def rows(self, seed: int = 0) -> tuple[int, ...]:
        """Rows per expert under the routing ``seed`` draws (:func:`route`)."""
        return route(self.model.experts, self.tokens, self.model.top_k, seed)

    def problem_name(self, seed: int = 0) -> str:
        """The name its problem gets: the preset's, with ``-sSEED`` for a seed other than 0."""
        return self.name if seed == 0 else f"{self.name}-s{seed}"


def _presets() -> Iterator[Preset]:
    for model in MODELS:
        for gemm in GEMMS:
            for phase, sizes in PHASES.items():
                for tokens in sizes:
                    name = f"{model.key}-gemm{gemm}-{phase}{_size_label(tokens)}"
                    yield Preset(name, model, gemm, phase, tokens)


#: Every preset by name, in the order above (model, GEMM, phase, size).
PRESETS: dict[str, Preset] = {p.name: p for p in _presets()}


def _groups() -> dict[str, tuple[str, ...]]:
    """Names that leave out the size, the GEMM or both, and the presets each names."""
    groups: dict[str, list[str]] = {}
    for p in PRESETS.values():
        key, gemm = p.model.key, f"gemm{p.gemm}"
        size = f"{p.phase}{_size_label(p.tokens)}"
        for group in (f"{key}-{gemm}-{p.phase}", f"{key}-{size}", f"{key}-{p.phase}", f"{key}-{gemm}", key):
            groups.setdefault(group, []).append(p.name)
    return {name: tuple(members) for name, members in groups.items()}


GROUPS = _groups()


class UnknownPreset(ValueError):
    """A name that is neither a preset nor a group; the message lists what names look like."""


def presets_named(name: str) -> tuple[Preset, ...]:
    """The presets ``name`` stands for: itself, or every member of a group."""
    if name in PRESETS:
        return (PRESETS[name],)
    if name in GROUPS:
        return tuple(PRESETS[member] for member in GROUPS[name])
    hint = f" (did you mean {', '.join(close)}?)" if (close := _closest(name)) else ""
    models = ", ".join(m.key for m in MODELS)
    raise UnknownPreset(
        f"unknown problem preset {name!r}{hint}: a preset is MODEL-gemm1|gemm2-decode1|16|64 or "
        f"-prefill4k|16k (e.g. dsv3-gemm1-decode1), and leaving out the size, the GEMM or both names "
        f"a group (dsv3-gemm1-decode, dsv3-decode1, dsv3-decode, dsv3-gemm1, dsv3); models: {models}"
    )


def _closest(name: str) -> list[str]:
    """Up to three known names sharing the longest start with ``name`` (more than the model key
    and its dash), shortest first: a lookup of ``name``'s starts, so that a file of thousands of
    unknown names costs microseconds each (a fuzzy match costs a millisecond a name)."""
    for end in range(min(len(name), _LONGEST), 1, -1):
        found = _STARTS.get(name[:end])
        if found is not None:
            model = name.split("-", 1)[0]
            if model in _MODEL_KEYS and end <= len(model) + 1:
                return []  # only the model in common: the format message says the rest
            return sorted(found, key=len)[:3]
    return []


def _starts() -> dict[str, list[str]]:
    """Every start (two characters or more) of every known name, model key and group, with the
    names that have it."""
    starts: dict[str, list[str]] = {}
    for known in dict.fromkeys((*(m.key for m in MODELS), *PRESETS, *GROUPS)):
        for end in range(2, len(known) + 1):
            starts.setdefault(known[:end], []).append(known)
    return starts


_STARTS = _starts()
_LONGEST = max(map(len, _STARTS))
_MODEL_KEYS = {m.key for m in MODELS}


def describe_presets(names: tuple[str, ...] = (), seed: int = 0, rows: bool = False) -> str:
    """A table of the presets ``names`` stand for (all of them when empty), one line each:
    experts, tokens, top-k, n, k, bias, rows in all, the most rows of an expert and the empty
    experts; with ``rows`` the rows per expert on a second line. Raises :class:`UnknownPreset`."""
    chosen = [p for name in names for p in presets_named(name)] if names else list(PRESETS.values())
    head = f"{'name':<26} {'experts':>7} {'tokens':>6} {'top_k':>5} {'n':>6} {'k':>6} bias"
    lines = [head + f" {'rows':>7} {'max':>6} empty"]
    for p in dict.fromkeys(chosen):
        counts = p.rows(seed)
        empty = sum(1 for c in counts if c == 0)
        lines.append(
            f"{p.problem_name(seed):<26} {p.model.experts:>7} {p.tokens:>6} {p.model.top_k:>5} "
            f"{p.n:>6} {p.k:>6} {'yes' if p.model.bias else 'no ':<4} {sum(counts):>7} "
            f"{max(counts):>6} {empty}"
        )
        if rows:
            lines.append("  rows: [" + ", ".join(map(str, counts)) + "]")
    return "\n".join(lines) + "\n"
