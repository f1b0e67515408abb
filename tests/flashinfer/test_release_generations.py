"""The CI guard of every launcher / GEMM-input generation (docs/releases.md): the harness and the
generated declarations of each family build (nvcc's front ends,
:mod:`pytest_tileconform.flashinfer.probe`) against one release of each generation, and what a
release lacks is refused as the tool's limitation, exactly the pieces listed here. A change to
the harness or codegen that breaks an older release fails here, not for a user.

Cheap by construction: the probe instantiates the harness for each case but no kernel (one
``nvcc -cuda`` per arch and release, 25-55 s on the shared 2-core machine against minutes for a
kernel), and both the releases (fetched once with pip, 7-16 MB each, only their sources unpacked)
and the probes' answers are kept in the build cache (``$TILECONFORM_CACHE_DIR`` or the default
one), so a rerun fetches and compiles nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_tileconform.compile.cache import default_cache_dir
from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.features import family, missing_piece, release_features
from pytest_tileconform.flashinfer.nvcc_flags import arch_nvcc_flags, nvcc_command, release_arch_nvcc_flags
from pytest_tileconform.flashinfer.probe import ReleaseProbe, front_end
from pytest_tileconform.flashinfer.releases import ReleaseError, fetch_release
from pytest_tileconform.flashinfer.sources import (
    FlashInferSources,
    FlashInferSourcesError,
    build_salt,
    find_cuda_home,
    find_sources,
)

pytestmark = pytest.mark.slow

K = KernelConfig
#: One configuration of each family whose code paths differ (the tile changes no declaration)
FAMILIES = {
    "sm90": K(90, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none"),
    "sm90 fp8 finalize": K(90, "fp8_e4m3", "fp8_e4m3", "bf16", (128, 128, 128), (1, 1, 1), False, "finalize"),
    "W4A8": K(90, "fp8_e4m3", "int4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"),
    "W4A16": K(90, "bf16", "mxfp4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"),
    "fp8 x MXFP4": K(
        90, "fp8_e4m3", "mxfp4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"
    ),
    "small-K": K(
        90,
        "fp8_e4m3",
        "mxfp4",
        "bf16",
        (128, 16, 128),
        (1, 1, 1),
        True,
        "none",
        mainloop="single_warpgroup_prefill",
    ),
    "sm100 nvfp4": K(100, "nvfp4", "nvfp4", "bf16", (128, 128, 256), (1, 1, 1), False, "finalize", "tma"),
    "sm100 activation": K(100, "bf16", "bf16", "bf16", (128, 64, 64), (1, 1, 1), False, "activation", "tma"),
    "sm120 nvfp4": K(120, "nvfp4", "nvfp4", "bf16", (128, 256, 128), (1, 1, 1), False, "finalize"),
    "sm120 mxfp8 x mxfp4": K(120, "mxfp8", "mxfp4", "bf16", (128, 128, 128), (1, 1, 1), False, "finalize"),
}
#: What releases before 0.6.16 (and 0.6.17) lack of the mixed families: fp8 x MXFP4 (no pre-MMA
#: scale mode; 0.6.12 and 0.6.17 also no fp4-for-fp8 interleave) and the small-K launcher
NO_FP8_MXFP4 = {"fp8 x MXFP4", "small-K"}
#: One release of each launcher generation (docs/releases.md) and the families the tool refuses
#: there, each for a piece the release lacks: the activation fusion before 0.7.2, fp8 x MXFP4 and
#: small-K before 0.6.16 and in 0.6.17. W4A8 and W4A16 build everywhere: with the scales packed
#: per CTA K (0.6.15 and older, 0.6.17) and B as stored (0.5.3 - 0.6.8) where the sources say so.
#: None = the installed release (0.7.4 in CI).
GENERATIONS: dict[str | None, set[str]] = {
    "0.5.3": NO_FP8_MXFP4 | {"sm100 activation"},
    "0.6.6": NO_FP8_MXFP4 | {"sm100 activation"},
    "0.6.12": NO_FP8_MXFP4 | {"sm100 activation"},
    "0.6.16": {"sm100 activation"},
    "0.6.17": NO_FP8_MXFP4 | {"sm100 activation"},
    None: set(),
}


def release_sources(version: str | None, cache_dir: Path) -> FlashInferSources:
    try:
        if version is None:
            return find_sources()
        return fetch_release(version, cache_dir).sources()
    except (ReleaseError, FlashInferSourcesError) as exc:
        if os.environ.get("CI"):
            raise  # the guard must run where it guards
        pytest.skip(f"FlashInfer {version or '(installed)'} is not at hand: {exc}")


@pytest.mark.parametrize("version", ["0.5.3", "0.6.12", None], ids=["0.5.3", "0.6.12", "installed"])
def test_w4a8_and_w4a16_are_built_in_every_layout_generation(version: str | None) -> None:
    """Read from the releases' own sources, no nvcc: packed scales with B as stored (0.5.3), packed
    with B interleaved (0.6.12) and folded with B interleaved (0.7.4) are each made by the harness,
    none refused (0.6.12's pair passed bit for bit on the H200 on every tile its heuristic runs,
    results/releases/h200-2026-12-02-mixed-0612)."""
    cache_dir = Path(os.environ.get("TILECONFORM_CACHE_DIR") or default_cache_dir())
    features = release_features(release_sources(version, cache_dir).root)
    assert features.mixed_weights in ("stored", "interleaved")
    why = {name: missing_piece(features, FAMILIES[name]) for name in ("W4A8", "W4A16")}
    assert why == {"W4A8": None, "W4A16": None}, why


@pytest.mark.parametrize("version", list(GENERATIONS), ids=[v or "installed" for v in GENERATIONS])
def test_the_tool_builds_every_family_each_generation_has(version: str | None) -> None:
    cache_dir = Path(os.environ.get("TILECONFORM_CACHE_DIR") or default_cache_dir())
    sources = release_sources(version, cache_dir)
    try:
        home = find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    salt = build_salt(sources, home, cache_dir)

    def command(config: KernelConfig) -> str:  # part of the probe's key, as the backend's is
        return " ".join(nvcc_command(config, sources, Path("{src}"), Path("{out}"), home))

    probe = ReleaseProbe(cache_dir, release_features(sources.root), salt, front_end(sources, home), command)
    found = probe.limitations(list(FAMILIES.values()), jobs=2)
    refused = {name for name, config in FAMILIES.items() if config in found}
    assert refused == GENERATIONS[version], {family(c): why.piece for c, why in found.items()}
    for why in found.values():  # each for a piece the release lacks, none for an nvcc error
        assert "error" not in why.piece, why.piece


#: What each release's own jit/core.py and jit/fused_moe.py give SM90: PDL's waits compiled in
#: (-DCUTLASS_ENABLE_GDC_FOR_SM90=1) from 0.6.8 on, CuTe's extended MMA shapes not in 0.5.3;
#: the installed release's are the built-in ones (its builds keep their cache keys).
SM90_FLAGS: dict[str | None, dict[str, bool]] = {
    "0.5.3": {"-DCUTLASS_ENABLE_GDC_FOR_SM90=1": False, "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED": False},
    "0.6.7": {"-DCUTLASS_ENABLE_GDC_FOR_SM90=1": False, "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED": True},
    "0.6.8": {"-DCUTLASS_ENABLE_GDC_FOR_SM90=1": True, "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED": True},
    None: {},
}


@pytest.mark.parametrize("version", list(SM90_FLAGS), ids=[v or "installed" for v in SM90_FLAGS])
def test_sm90_builds_with_the_release_s_own_flags(version: str | None) -> None:
    cache_dir = Path(os.environ.get("TILECONFORM_CACHE_DIR") or default_cache_dir())
    package = release_sources(version, cache_dir).root.parent
    config = FAMILIES["sm90"]
    flags = release_arch_nvcc_flags(config, (13, 0), package)
    assert "-gencode=arch=compute_90a,code=sm_90a" in flags
    assert {flag: flag in flags for flag in SM90_FLAGS[version]} == SM90_FLAGS[version]
    if version is None:
        assert flags == arch_nvcc_flags(config, (13, 0))
