"""SM90 fpA_intB, read from the installed FlashInfer (0.7.4): what its generator instantiates, the
unit rendered by its own ``get_file_content``, its runner's tactic list as its heuristic answers
(``data/fpaintb-tactics-sm90-flashinfer-0.7.4.jsonl`` is the probe's output; one slow test builds
the probe, about 65 s once, and checks it still says so), and the shipped matrix naming exactly
those tactics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.paths import REPO

from pytest_tileconform.compile.cache import BuildCache
from pytest_tileconform.dtypes import shape_label
from pytest_tileconform.flashinfer.generator import load_generator
from pytest_tileconform.flashinfer.sources import FlashInferSources, find_cuda_home, find_sources
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.fpaintb import (
    MixedFamily,
    mixed_unit,
    offered_tactics,
    parse_tactics,
    read_ops,
    unit_source,
)
from pytest_tileconform.flashinfer_dense.offered import DenseSourcesError
from pytest_tileconform.flashinfer_dense.unit import NotOffered
from pytest_tileconform.matrix.cases import Case

SAVED = REPO / "tests" / "data" / "fpaintb-tactics-sm90-flashinfer-0.7.4.jsonl"
MATRIX = REPO / "matrices" / "gemm-sm90-fpaintb.yaml"


@pytest.fixture(scope="module")
def installed() -> FlashInferSources:
    return find_sources()


@pytest.fixture(scope="module")
def family(installed: FlashInferSources) -> MixedFamily:
    return MixedFamily(read_ops(installed), parse_tactics(SAVED.read_text().splitlines()))


def test_the_runner_offers_21_cutlass_tactics_and_its_cuda_kernel_entry(family: MixedFamily) -> None:
    tactics = family.tactics
    assert len(tactics) == 22 and [t.index for t in tactics] == list(range(22))
    assert [t.cuda_kernel for t in tactics] == [False] * 21 + [True]
    # the CUDA-core entry repeats the first tile's configuration, which the runner's gemm() runs
    assert (tactics[-1].tile_bytes, tactics[-1].cluster) == (tactics[0].tile_bytes, tactics[0].cluster)
    assert {t.tile_bytes[2] for t in tactics} == {128}


def test_every_offered_tactic_is_instantiated_for_each_activation_weight_and_scale(
    family: MixedFamily,
) -> None:
    kinds = {(o.act, o.weight, o.out, o.quant) for o in family.ops}
    assert {(a, w) for a, w, _, _ in kinds} == {(a, w) for a in ("bf16", "fp16") for w in ("int4", "int8")}
    assert {q for *_, q in kinds} == {"per_column", "finegrained", "finegrained_scale_and_zeros"}
    for act, weight, out, quant in kinds:
        shapes = {
            (o.tile, o.cluster)
            for o in family.ops
            if (o.act, o.weight, o.out, o.quant) == (act, weight, out, quant)
        }
        assert shapes == {(t.tile(act), t.cluster) for t in family.tactics}, (act, weight, quant)


def test_the_unit_is_flashinfers_own_file_for_the_operation(
    installed: FlashInferSources, family: MixedFamily
) -> None:
    generator = load_generator(installed)
    ops = [o for o in generator.generate_sm90_mixed_gemm_operations() if o.weight_type.name == "u4"]
    op = next(
        o
        for o in family.ops
        if (o.act, o.weight, o.quant, o.cluster) == ("bf16", "int4", "finegrained", (2, 2, 1))
    )
    tactic = family.tactic("bf16", op.tile, op.cluster)
    assert tactic is not None and not tactic.cuda_kernel
    source = unit_source(op, tactic, installed.version)
    ours = [o for o in ops if generator.get_file_content([op.file.split('"')[1]], [o]) == op.file]
    assert len(ours) == 1  # exactly one generator operation renders this file
    inl = "tensorrt_llm/kernels/cutlass_kernels/fpA_intB_gemm/launchers/fpA_intB_launcher_sm90.inl"
    assert op.file in source and f'#include "{inl}"' in op.file
    assert f"#define TILECONFORM_TILE_NAME {tactic.tile_name}" in source
    assert "#define TILECONFORM_CLUSTER_NAME ClusterShape_2x2x1" in source
    assert (
        "sm90_generic_mixed_gemm_kernelLauncher<__nv_bfloat16, cutlass::uint4b_t, __nv_bfloat16"
        in op.launcher
    )
    assert "cutlass::WeightOnlyQuantOp::FINEGRAINED_SCALE_ONLY" in op.launcher


def test_the_shipped_matrix_names_every_offered_tactic(
    pytester: pytest.Pytester, family: MixedFamily
) -> None:
    pytester.makefile(".yaml", **{MATRIX.stem: MATRIX.read_text()})
    collected = pytester.runpytest_subprocess("--tile-matrix", MATRIX.name, "--collect-only", "-q")
    ids = [line.split("::")[1] for line in collected.outlines if "::" in line]
    cutlass = [t for t in family.tactics if not t.cuda_kernel]
    for prefix, act in (("sm90-bf16xint4-bf16-", "bf16"), ("sm90-fp16xint8-fp16-", "fp16")):
        # the cluster word only where not 1x1x1, as every dense family names its cases
        words = [i.split("-")[3:5] for i in ids if i.startswith(prefix)]
        named = {(tile, cluster[1:] if cluster.startswith("c") else "1x1x1") for tile, cluster in words}
        assert named == {(shape_label(t.tile(act)), shape_label(t.cluster)) for t in cutlass}
    assert len(ids) == 2 * 2 * len(cutlass)  # two problems each


def test_a_probe_line_out_of_shape_is_refused() -> None:
    good = (
        '{"tactic": 0, "tile_bytes": [64, 16, 128], "cluster": [1, 1, 1], "mainloop": 0, '
        '"epilogue": 0, "cuda_kernel": false}'
    )
    assert parse_tactics([good])[0].tile("bf16") == (64, 16, 64)
    for bad, said in (
        ("not json", "line 1 unreadable"),
        (good.replace("[64, 16, 128]", "[64, 16]"), "three integers"),
        (good.replace('"tactic": 0', '"tactic": 3'), "out of order"),
    ):
        with pytest.raises(DenseSourcesError, match=said):
            parse_tactics([bad])
    with pytest.raises(DenseSourcesError, match="no SM90 fpA_intB tactic"):
        parse_tactics([])


@pytest.mark.slow
def test_flashinfers_heuristic_still_answers_the_saved_list(installed: FlashInferSources) -> None:
    cache_dir = Path(os.environ["TILECONFORM_CACHE_DIR"])
    live = offered_tactics(installed, find_cuda_home(), cache_dir, BuildCache(cache_dir))
    assert live == parse_tactics(SAVED.read_text().splitlines())


def case(
    tile: tuple[int, int, int], cluster: tuple[int, int, int], group: int, weight: str = "int4"
) -> Case[DenseAxes]:
    axes = DenseAxes(False, (1, 768, 1024), cluster=cluster, group=group)
    return Case(
        Path("m.yaml"), "dense", "sm90", "bf16", weight, "bf16", f"bf16x{weight}-bf16", tile, axes, None, None
    )


def test_a_case_maps_to_its_tactic_and_what_is_not_offered_is_refused(family: MixedFamily) -> None:
    op, tactic, _ = mixed_unit(family, case((128, 256, 64), (2, 2, 1), 128), "0.7.4")
    assert (op.quant, tactic.index, tactic.tile_name) == ("finegrained", 20, "CtaShape128x256x128B")
    assert mixed_unit(family, case((64, 16, 64), (1, 1, 1), 0, "int8"), "0.7.4")[0].quant == "per_column"
    with pytest.raises(NotOffered, match="offers no tactic of CTA 64x16x64 and cluster 2x1x1"):
        mixed_unit(family, case((64, 16, 64), (2, 1, 1), 128), "0.7.4")
    with pytest.raises(NotOffered, match="offers no tactic of CTA 64x16x128"):
        mixed_unit(family, case((64, 16, 128), (1, 1, 1), 128), "0.7.4")
