"""A dense case's translation unit is what FlashInfer's JIT renders for it: against the installed
FlashInfer (0.7.4), every SM120 MXFP8 tactic maps to its rendered template, the generator's own
flags and the tactic's tile enum; a configuration FlashInfer does not offer, or a template the
renderer cannot render as Jinja would, is refused with why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tileconform.dtypes import DTYPES
from pytest_tileconform.flashinfer.sources import FlashInferSources, build_roots, find_cuda_home, find_sources
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.generator import Template, UnitRecipe, read_recipe
from pytest_tileconform.flashinfer_dense.offered import DenseSourcesError, read_offered
from pytest_tileconform.flashinfer_dense.unit import (
    HARNESS_DIR,
    PARTS_SCRIPT,
    NotOffered,
    build_command,
    harness_fingerprint,
    harnessed_archs,
    make_unit,
    nvcc_flags,
)
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.verdict import NotJudgeable


@pytest.fixture(scope="module")
def installed() -> FlashInferSources:
    return find_sources()


def case(
    act: str,
    out: str,
    tile: tuple[int, int, int],
    swap: bool,
    arch: str = "sm120",
    stream_k: bool = False,
    cluster: tuple[int, int, int] = (1, 1, 1),
) -> Case[DenseAxes]:
    label = f"{act}-{out}"
    return Case(
        Path("m.yaml"),
        "dense",
        arch,
        act,
        act,
        out,
        label,
        tile,
        DenseAxes(swap, (256, 256, 512), stream_k, cluster),
        None,
        None,
    )


@pytest.mark.parametrize(
    ("module", "act", "tactics"),
    [("mxfp8_gemm_cutlass_sm120", "mxfp8", 6), ("fp4_gemm_cutlass_sm120", "nvfp4", 32)],
)
def test_every_sm120_tactic_renders_flashinfers_template(
    installed: FlashInferSources, module: str, act: str, tactics: int
) -> None:
    offered = read_offered(installed)
    family = offered.family(module)
    template = (installed.csrc / f"{module}.jinja").read_text()
    assert len(family.tactics) == tactics
    for tactic in family.tactics:
        for out in ("bf16", "fp16"):
            unit = make_unit(
                installed, offered, case(act, out, tactic.cta, tactic.swap_ab, stream_k=tactic.stream_k)
            )
            assert unit.tactic == tactic
            m, n, k = tactic.cta
            cuda_type = DTYPES[out].cuda_type
            # the rendered template, as jinja2 renders it, is the unit's beginning (after one comment)
            rendered = template.replace("{{ type }}", cuda_type)
            rendered = rendered.replace("{{ cta_m }}", str(m)).replace("{{ cta_n }}", str(n))
            rendered = rendered.replace("{{ cta_k }}", str(k))
            assert unit.source.split("\n", 1)[1].startswith(rendered)
            assert f"#define TILECONFORM_TILE_NAME {tactic.tile}\n" in unit.source
            assert unit.source.rstrip().endswith(f'#include "{module}.h"')


@pytest.mark.parametrize(
    ("module", "act", "tactics", "outs"),
    [
        ("mxfp8_gemm_cutlass", "mxfp8", 32, ("bf16", "fp16")),
        ("fp4_gemm_cutlass", "nvfp4", 32, ("bf16", "fp16")),
        ("fp8_gemm_cutlass", "fp8_e4m3", 30, ("bf16", "fp16")),
        ("bf16_gemm_cutlass", "bf16", 25, ("bf16", "fp16", "fp32")),
    ],
)
def test_every_sm100_tactic_renders_flashinfers_template(
    installed: FlashInferSources, module: str, act: str, tactics: int, outs: tuple[str, ...]
) -> None:
    """Each SM100 tactic (a tile and a cluster shape) is FlashInfer's template rendered for its CTA
    shape, built with the generator's flags for compute_100a, driven by the SM100 harness; the
    cluster shapes of a tile share one unit (the dispatch picks the launcher at run time). The
    counts are FlashInfer 0.7.4's getConfigs(): 4 tiles x 8 clusters (fp4, mxfp8), 6 x 5 (fp8),
    5 x 5 (bf16)."""
    offered = read_offered(installed)
    family = offered.family(module)
    assert family.arch == "sm100" and len(family.tactics) == tactics
    assert (HARNESS_DIR / f"{module}_sm100.h").is_file()
    template = (installed.csrc / f"{module}.jinja").read_text()
    sources: dict[tuple[str, tuple[int, int, int]], set[str]] = {}
    for tactic in family.tactics:
        for out in outs:
            unit = make_unit(
                installed, offered, case(act, out, tactic.cta, False, "sm100", cluster=tactic.cluster)
            )
            assert unit.tactic == tactic and unit.family == family
            m, n, k = tactic.cta
            rendered = template.replace("{{ type }}", DTYPES[out].cuda_type)
            rendered = rendered.replace("{{ cta_m }}", str(m)).replace("{{ cta_n }}", str(n))
            rendered = rendered.replace("{{ cta_k }}", str(k))
            assert unit.source.split("\n", 1)[1].startswith(rendered)
            assert f"#define TILECONFORM_TILE_NAME {tactic.tile}\n" in unit.source
            assert unit.source.rstrip().endswith(f'#include "{module}_sm100.h"')
            sources.setdefault((out, tactic.cta), set()).add(unit.source)
    assert len(sources) == len(outs) * len(family.instantiated) and all(len(s) == 1 for s in sources.values())
    flags = nvcc_flags(installed, family, 100, find_cuda_home())
    assert "-gencode=arch=compute_100a,code=sm_100a" in flags
    recipe = read_recipe(installed, f"gen_gemm_sm100_module_cutlass_{family.kind}")
    assert flags[-len(recipe.extra_flags) :] == list(recipe.extra_flags)
    assert "-DCUTLASS_ENABLE_GDC_FOR_SM100=1" in recipe.extra_flags


def test_sm100_offers_no_swap_ab_and_names_the_clusters_it_does(installed: FlashInferSources) -> None:
    offered = read_offered(installed)
    tactic = offered.family("fp4_gemm_cutlass").tactics[0]
    with pytest.raises(NotOffered, match=r"swap_ab True, stream_k False and cluster 2x4x1"):
        make_unit(
            installed, offered, case("nvfp4", "bf16", tactic.cta, True, "sm100", cluster=tactic.cluster)
        )
    with pytest.raises(NotOffered, match=r"cluster 4x1x1; it offers"):  # instantiated, never offered
        make_unit(installed, offered, case("nvfp4", "bf16", tactic.cta, False, "sm100", cluster=(4, 1, 1)))


def test_the_fp4_tactics_of_one_tile_share_one_unit(installed: FlashInferSources) -> None:
    """swap_ab and the scheduler are chosen at run time: the four tactics of a tile are one build."""
    offered = read_offered(installed)
    family = offered.family("fp4_gemm_cutlass_sm120")
    tile = family.tactics[0].cta
    units = [
        make_unit(installed, offered, case("nvfp4", "bf16", t.cta, t.swap_ab, stream_k=t.stream_k))
        for t in family.tactics
        if t.cta == tile
    ]
    assert {(u.tactic.swap_ab, u.tactic.stream_k) for u in units} == {(s, k) for s in (0, 1) for k in (0, 1)}
    assert len({u.source for u in units}) == 1
    assert read_recipe(installed, "gen_gemm_sm120_module_cutlass_fp4").extra_flags == (
        "-DENABLE_BF16",
        "-DENABLE_FP4",
        "-DCUTLASS_ENABLE_GDC_FOR_SM100=1",
    )


def test_the_flags_are_the_generators(installed: FlashInferSources) -> None:
    offered = read_offered(installed)
    family = offered.family("mxfp8_gemm_cutlass_sm120")
    recipe = read_recipe(installed, "gen_gemm_sm120_module_cutlass_mxfp8")
    assert recipe.extra_flags == ("-DENABLE_BF16", "-DCUTLASS_ENABLE_GDC_FOR_SM100=1")
    flags = nvcc_flags(installed, family, 120, find_cuda_home())
    assert flags[-2:] == list(recipe.extra_flags)
    assert "-gencode=arch=compute_120f,code=sm_120f" in flags  # CUDA >= 12.9 here
    command, roots = build_command(
        installed, family, 120, find_cuda_home(), Path("/x-cache/rt.a"), Path("/x-cache")
    )
    # the key's command names no install root, only placeholders
    assert not any(str(installed.root) in part for part in command)
    assert "{flashinfer}/cutlass/include" in command and dict(roots)["flashinfer"] == str(installed.root)
    # the roots every unit of FlashInfer's sources names, the MoE backend's too
    shared = build_roots(installed, HARNESS_DIR, find_cuda_home(), Path("/x-cache"))
    assert dict(roots) == {name: str(path) for name, path in shared.items()}


def test_an_edited_harness_changes_every_units_text(installed: FlashInferSources, tmp_path: Path) -> None:
    """The unit only includes its family's header: the headers' digest in its text is what keeps a
    cached build of an older harness from being served."""
    offered = read_offered(installed)
    source = make_unit(installed, offered, case("mxfp8", "bf16", (128, 128, 128), False)).source
    assert f"// harness sources {harness_fingerprint()}\n" in source
    copy, edited = tmp_path / "copy", tmp_path / "edited"
    for folder in (copy, edited):
        folder.mkdir()
        for header in HARNESS_DIR.glob("*.h"):
            (folder / header.name).write_bytes(header.read_bytes())
    (edited / "dense_verdict.h").write_text("// edited\n")
    assert harness_fingerprint(copy) == harness_fingerprint() != harness_fingerprint(edited)


def test_what_flashinfer_does_not_offer_is_refused(installed: FlashInferSources) -> None:
    offered = read_offered(installed)
    with pytest.raises(
        NotOffered, match=r"offers no tactic of CTA 256x128x128 .*\('128x128x128', True, False, '1x1x1'\)"
    ):
        make_unit(installed, offered, case("mxfp8", "bf16", (256, 128, 128), False))
    with pytest.raises(NotOffered, match="renders outputs"):
        make_unit(installed, offered, case("mxfp8", "fp32", (128, 128, 128), False))
    with pytest.raises(NotOffered, match="no dense CUTLASS GEMM for mxfp8 x mxfp8 on sm90"):
        make_unit(installed, offered, case("mxfp8", "bf16", (128, 128, 128), False, "sm90"))


def test_a_family_without_a_harness_is_not_judged(
    installed: FlashInferSources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = read_offered(installed)
    assert harnessed_archs() == ("sm90", "sm100", "sm103", "sm120", "sm121")
    for header in HARNESS_DIR.glob("*.h"):
        if header.name != "fp4_gemm_cutlass_sm103.h":
            (tmp_path / header.name).write_bytes(header.read_bytes())
    monkeypatch.setattr("pytest_tileconform.flashinfer_dense.unit.HARNESS_DIR", tmp_path)
    tactic = offered.family("fp4_gemm_cutlass_sm103").tactics[0]
    with pytest.raises(NotJudgeable, match="fp4_gemm_cutlass_sm103 has no harness"):
        make_unit(installed, offered, case("nvfp4", "bf16", tactic.cta, tactic.swap_ab, "sm103"))


def test_sm103_fp4_units_hold_the_files_flashinfer_renders_for_the_tile(installed: FlashInferSources) -> None:
    """SM103's fp4 generator renders its K768 tiles from fp4_gemm_cutlass_sm103.jinja, one file, and
    its K128/K256 tiles twice, from fp4_gemm_cutlass.jinja (TMA epilogue) and
    fp4_gemm_cutlass_sm103_generic_store256.jinja, which cannot share a translation unit: a unit of
    such a tile is those two files and the harness as parts, each compiled alone and linked. The 63
    tactics (7 tiles x 9 clusters) of both output types make 14 units."""
    offered = read_offered(installed)
    family = offered.family("fp4_gemm_cutlass_sm103")
    assert len(family.tactics) == 63
    recipe = read_recipe(installed, "gen_gemm_sm103_module_cutlass_fp4")
    units: dict[tuple[str, tuple[int, int, int]], set[str]] = {}
    for tactic in family.tactics:
        for out in ("bf16", "fp16"):
            unit = make_unit(
                installed, offered, case("nvfp4", out, tactic.cta, False, "sm103", cluster=tactic.cluster)
            )
            assert unit.tactic == tactic and unit.family == family
            m, n, k = tactic.cta
            templates = [t.path.name for t in recipe.templates_for(tactic.cta)]
            if k == 768:
                assert templates == ["fp4_gemm_cutlass_sm103.jinja"] and unit.parts == 0
                ultra = f"INSTANTIATE_FP4_ULTRA_GEMM_KERNEL_LAUNCHER({DTYPES[out].cuda_type}, {m}, {n}, {k},"
                assert ultra in unit.source
            else:
                assert templates == [
                    "fp4_gemm_cutlass.jinja",
                    "fp4_gemm_cutlass_sm103_generic_store256.jinja",
                ]
                assert unit.parts == 2
                # each rendered file in its own part, the harness in part 0 (the #else)
                one, two = (
                    unit.source.index("#if TILECONFORM_PART == 1"),
                    unit.source.index("#elif TILECONFORM_PART == 2"),
                )
                harness = unit.source.index("#else")
                assert one < unit.source.index('fp4_gemm_cutlass_template.h"') < two
                assert two < unit.source.index("FLASHINFER_SM103_GENERIC_STORE256_NAMESPACE") < harness
                assert unit.source.index('#include "fp4_gemm_cutlass_sm103.h"') > harness
            units.setdefault((out, tactic.cta), set()).add(unit.source)
    assert len(units) == 14 and all(len(s) == 1 for s in units.values())
    unit = make_unit(installed, offered, case("nvfp4", "bf16", (128, 256, 128), False, "sm103"))
    command, _ = build_command(
        installed, family, 103, find_cuda_home(), Path("/x-cache/rt.a"), Path("/x-cache"), unit.parts
    )
    assert command[2] == PARTS_SCRIPT and command[7] == "2"  # parts 0 (the harness), 1 and 2
    assert "-gencode=arch=compute_103a,code=sm_103a" in command


def test_sm121_is_judged_by_the_sm120_module_built_for_its_own_device(installed: FlashInferSources) -> None:
    # FlashInfer's generator names majors, not archs (supported_major_versions=[12]): a GB10 runs
    # the sm120 module, compiled for compute_121a as its JIT does for that device
    offered = read_offered(installed)
    unit = make_unit(installed, offered, case("mxfp8", "bf16", (128, 128, 128), True, "sm121"))
    assert unit.family.module == "mxfp8_gemm_cutlass_sm120"
    flags = nvcc_flags(installed, unit.family, 121, find_cuda_home())
    assert "-gencode=arch=compute_121a,code=sm_121a" in flags
    assert not any("compute_120" in flag for flag in flags)


def test_a_template_beyond_plain_substitution_is_refused(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("X({{ type }}, {{ cta_m }})\n")
    assert Template(template).render(type="half", cta_m=64) == "X(half, 64)\n"
    with pytest.raises(DenseSourcesError, match=r"needs \['cta_m'\]"):
        Template(template).render(type="half")
    template.write_text("{% for t in types %}X({{ t }}){% endfor %}\n")
    with pytest.raises(DenseSourcesError, match="beyond plain substitutions"):
        Template(template).render(t="half")
    with pytest.raises(DenseSourcesError, match="renders no template for CTA"):
        UnitRecipe("f", (Template(template, frozenset({(128, 64, 128)})),), ()).templates_for((64, 64, 64))


def test_a_unit_of_parts_links_every_part_or_fails_with_the_failed_one(tmp_path: Path) -> None:
    """PARTS_SCRIPT with stand-ins: the compiler writes its part number into its object (and fails
    for the part FAIL names), the linker concatenates its inputs. Every part is compiled, the
    harness (part 0) first on the link line; a failed part fails the build with its status, after
    every part has ended, and no program is made."""
    compiler, linker = tmp_path / "cc", tmp_path / "ld"
    compiler.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "part = next(a.split('=')[1] for a in args if a.startswith('-DTILECONFORM_PART='))\n"
        "if part == os.environ.get('FAIL'):\n"
        "    sys.exit(3)\n"
        "open(args[args.index('-o') + 1], 'w').write(part + '\\n')\n"
    )
    linker.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "args = sys.argv[1:]\n"
        "out = args.index('-o')\n"
        "inputs = [a for i, a in enumerate(args) if not a.startswith('-') and i != out + 1]\n"
        "open(args[out + 1], 'w').write(''.join(open(p).read() for p in inputs))\n"
    )
    for tool in (compiler, linker):
        tool.chmod(0o755)
    (tmp_path / "rt.a").write_text("runtime\n")
    folder = tmp_path / "with space"
    folder.mkdir()
    out = folder / "harness"
    command = [
        "sh",
        "-c",
        PARTS_SCRIPT,
        "sh",
        str(out),
        str(linker),
        str(tmp_path / "rt.a"),
        "2",
        str(compiler),
        "-c",
        "u.cu",
    ]
    assert subprocess.run(command, check=False).returncode == 0
    assert out.read_text() == "0\n1\n2\nruntime\n"
    assert sorted(p.name for p in folder.iterdir()) == ["harness"]  # the objects removed
    out.unlink()
    failed = subprocess.run(command, env={**os.environ, "FAIL": "1"}, check=False)
    assert failed.returncode == 3 and not out.exists()
