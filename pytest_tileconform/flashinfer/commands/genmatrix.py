"""``tileconform gen-matrix --from-flashinfer``: a matrix (format version 1) of exactly the MoE
grouped-GEMM configurations the installed FlashInfer instantiates for an architecture.

One suite per dtype combination; per tile, the clusters, swap_ab and fusions FlashInfer emits for
it, split into several tile entries where they are not a full product, so that the matrix
expands to exactly the generator's set (checked by loading the text before it is written).
The matrix carries no expectations: run it (``--tile-device virtual`` without the GPU) with
``--tile-update`` to record the verdicts.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...archs import arch_name
from ...dtypes import shape_label
from ...matrix.load import MatrixInvalid, load_matrix
from .. import NAME
from ..axes import FUSIONS, KINDS, moe_cases
from ..configs import KernelConfig, dynamic_clusters
from ..generator import Skipped
from ..problem import DEFAULT_PROBLEM, MIXED_PROBLEM, SMALL_K_PREFILL_PROBLEM


class GenMatrixError(ValueError):
    pass


def select_dtypes(configs: Sequence[KernelConfig], wanted: Sequence[str]) -> list[KernelConfig]:
    """Keep the configs whose dtypes one of ``wanted`` selects (:func:`...dtypes.select_combinations`:
    a combination, ``nvfp4-bf16``, or an activation, ``nvfp4``)."""
    from ...dtypes import select_combinations

    if not wanted:
        return list(configs)
    combos = sorted({(c.act, c.weight, c.out) for c in configs})
    try:
        selected = {w: select_combinations(w, combos) for w in wanted}
    except ValueError as exc:
        raise GenMatrixError(f"--dtype {exc}") from None
    unknown = [w for w, found in selected.items() if not found]
    if unknown:
        labels = {c.dtype_label for c in configs} | {c.act for c in configs}
        raise GenMatrixError(
            f"--dtype {', '.join(unknown)}: not instantiated for this arch; choose from "
            f"{', '.join(sorted(labels))}"
        )
    chosen = {combo for found in selected.values() for combo in found}
    return [c for c in configs if (c.act, c.weight, c.out) in chosen]


@dataclass(frozen=True)
class _Entry:
    tile: tuple[int, int, int]
    clusters: tuple[tuple[int, int, int], ...]
    swaps: tuple[bool, ...]
    fusions: tuple[str, ...]
    epilogue: str = ""  # "nosmem" written; the TMA epilogue is the default
    dynamic: tuple[tuple[int, int, int], ...] = ()  # runtime clusters of a dynamic-CGA kernel
    mainloop: str = ""  # SM90 mixed input
    kernel_arch: int = 0  # another arch's kernel set (SM100's on sm103)

    def yaml(self) -> str:
        parts = [f"shape: {shape_label(self.tile)}"]
        parts.append("cluster: [" + ", ".join(shape_label(c) for c in self.clusters) + "]")
        if self.dynamic:
            parts.append("dynamic_cluster: [" + ", ".join(shape_label(c) for c in self.dynamic) + "]")
        parts.append("swap_ab: [" + ", ".join(str(s).lower() for s in self.swaps) + "]")
        parts.append("fusion: [" + ", ".join(self.fusions) + "]")
        if self.epilogue == "nosmem":
            parts.append("epilogue: nosmem")
        if self.mainloop:
            parts.append(f"mainloop: {self.mainloop}")
        if self.mainloop == "single_warpgroup_prefill":
            parts.append(f"problems: [{SMALL_K_PREFILL_PROBLEM.flow()}]")
        if self.kernel_arch:
            parts.append(f"kernel_arch: {arch_name(self.kernel_arch)}")
        return "{" + ", ".join(parts) + "}"


#: epilogue, runtime clusters, mainloop, kernel arch
_Variant = tuple[str, tuple[tuple[int, int, int], ...], str, int]


def _variant(config: KernelConfig) -> _Variant:
    dynamic = dynamic_clusters(config.cluster) if config.dynamic_cga else ()
    return config.epilogue, dynamic, config.mainloop, config.kernel_arch


def _entries(configs: Sequence[KernelConfig]) -> list[_Entry]:
    """Tile entries whose products are exactly ``configs`` (all of one dtype combination); a
    dynamic-CGA kernel comes once per runtime cluster FlashInfer's heuristic pairs it with."""
    by_tile: dict[tuple[tuple[int, int, int], _Variant], set[tuple[tuple[int, int, int], bool, str]]]
    by_tile = defaultdict(set)
    for c in configs:
        by_tile[(c.tile, _variant(c))].add((c.cluster, c.swap_ab, c.fusion))
    entries = []
    for (tile, variant), combos in by_tile.items():
        # clusters that come with the same (swap_ab, fusion) set share an entry
        by_cluster: dict[tuple[int, int, int], frozenset[tuple[bool, str]]] = {}
        for cluster in sorted({c for c, _, _ in combos}):
            by_cluster[cluster] = frozenset((s, f) for c, s, f in combos if c == cluster)
        groups: dict[frozenset[tuple[bool, str]], list[tuple[int, int, int]]] = defaultdict(list)
        for cluster, pairs in by_cluster.items():
            groups[pairs].append(cluster)
        for pairs, clusters in groups.items():
            swaps = sorted({s for s, _ in pairs})
            fusions = sorted({f for _, f in pairs}, key=FUSIONS.index)
            if len(pairs) == len(swaps) * len(fusions):
                entries.append(_Entry(tile, tuple(clusters), tuple(swaps), tuple(fusions), *variant))
            else:  # not a product: one entry per swap_ab value
                for swap in swaps:
                    fs = sorted({f for s, f in pairs if s == swap}, key=FUSIONS.index)
                    entries.append(_Entry(tile, tuple(clusters), (swap,), tuple(fs), *variant))
    return entries


def case_count(configs: Sequence[KernelConfig]) -> int:
    """How many cases ``configs`` give: one each, a dynamic-CGA kernel one per runtime cluster."""
    return sum(len(dynamic_clusters(c.cluster)) if c.dynamic_cga else 1 for c in configs)


def matrix_text(
    configs: Sequence[KernelConfig],
    arch: str,
    *,
    flashinfer_version: str,
    generator: Path | None,
    skipped: Sequence[Skipped],
    command: str,
) -> str:
    if not configs:
        raise GenMatrixError(f"no configuration to write for {arch}")
    suites: dict[str, list[KernelConfig]] = defaultdict(list)
    for c in configs:
        suites[c.dtype_label].append(c)
    today = dt.date.today().isoformat()
    if generator is not None and "flashinfer" in generator.parts:
        # the path inside the package, not this machine's site-packages
        parts = generator.parts
        generator = Path(*parts[len(parts) - 1 - parts[::-1].index("flashinfer") :])
    lines = [
        f"# FlashInfer {flashinfer_version}'s CUTLASS MoE grouped GEMM for {arch}, exactly as its generator",
        f"# instantiates it ({generator or 'generate_kernels.py'}),",
        f"# written by `{command}` on {today}: {len(configs)} instantiations, {case_count(configs)} cases",
        "# (a dynamic-CGA kernel once per runtime cluster FlashInfer's heuristic offers it with).",
        "# Tiles are CTA M x N x K with K in ELEMENTS of the activation type.",
    ]
    if skipped:
        lines.append(
            f"# Left out: {len(skipped)} generator operation(s) this harness does not build "
            "(`tileconform gen-matrix -v` lists them)."
        )
    lines += [
        "# No expectations yet: run it, e.g. `pytest --tile-matrix THIS.yaml --tile-device virtual",
        "# --tile-update`, to record the verdicts.",
        "version: 1",
        f"backend: {NAME}",
        "defaults:",
        f"  arch: {arch}",
        "  problems:",
        "    # 4 experts: one with no rows, one with a single row, two that are not multiples of 128",
        f"    - {DEFAULT_PROBLEM.flow()}",
        "suites:",
    ]
    for label, members in suites.items():
        first = members[0]
        lines += [
            f"  - name: {label}",
            f"    dtype: {{act: {first.act}, weight: {first.weight}, out: {first.out}}}",
            *([f"    problems: [{MIXED_PROBLEM.flow()}]"] if first.mixed else []),
            "    tile:",
        ]
        lines += [f"      - {entry.yaml()}" for entry in _entries(members)]
    return "\n".join(lines) + "\n"


def check_text(text: str, configs: Sequence[KernelConfig], arch: str, where: Path) -> None:
    """The written matrix must expand to exactly ``configs`` (guards the entry grouping)."""
    from ..buildscript import kernel_config

    try:
        loaded = load_matrix(where, KINDS, {NAME}, text=text)
    except MatrixInvalid as exc:  # a bug here, not bad input
        raise AssertionError(f"gen-matrix wrote an invalid matrix:\n{exc}") from None
    got = {kernel_config(c) for c in moe_cases(loaded.cases) if c.arch == arch}
    want = set(configs)
    if got != want or len(loaded.cases) != case_count(configs):
        raise AssertionError(
            f"gen-matrix grouping is wrong: {len(got - want)} extra, {len(want - got)} missing "
            f"instantiation(s); {len(loaded.cases)} cases for {case_count(configs)}"
        )
