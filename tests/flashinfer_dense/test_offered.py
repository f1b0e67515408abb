"""What the dense reader finds in FlashInfer's own generator and runners.

Against the installed FlashInfer (0.7.4): the two lists FlashInfer keeps apart, the JIT generator's
rendered CTA shapes and each runner's ``getConfigs()``, must agree (a tactic whose shape is not
rendered could not link), and the SM120 MXFP8 tactics behind FlashInfer #3568 are the runner's.
On small written sources: the reader mirrors ``getConfigs()``'s order, its cluster loop, its
``best_tactics_index`` reordering and its flags, and says where and what when a piece is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.sources import FlashInferSources, find_sources
from pytest_tileconform.flashinfer_dense.offered import DenseSourcesError, read_offered

#: the JIT modules issue 35 names (fp8_blockscale and fpA_intB are TensorRT-LLM runners, not read yet)
ISSUE_MODULES = {
    "fp4_gemm_cutlass",
    "fp4_gemm_cutlass_sm103",
    "fp4_gemm_cutlass_sm120",
    "mxfp8_gemm_cutlass",
    "mxfp8_gemm_cutlass_sm120",
    "fp8_gemm_cutlass",
}


@pytest.fixture(scope="module")
def installed() -> FlashInferSources:
    return find_sources()


def test_every_offered_tactic_of_installed_flashinfer_is_a_rendered_shape(
    installed: FlashInferSources,
) -> None:
    offered = read_offered(installed)
    modules = {family.module for family in offered.families}
    assert modules >= ISSUE_MODULES, f"read {sorted(modules)}"
    for family in offered.families:
        assert family.tactics, family.module
        assert [t.index for t in family.tactics] == list(range(len(family.tactics)))
        assert len({t.name for t in family.tactics}) == len(family.tactics), f"{family.module}: duplicate"
        assert family.uninstantiated() == (), f"{family.module}: {family.uninstantiated()}"
        # every rendered shape is offered by some tactic: nothing compiled for nothing
        assert {cta for t in family.tactics for cta in t.ctas} == set(family.instantiated), family.module
        assert family.runner.is_file() and family.runner.read_text().count("getConfigs") >= 1
    assert set(offered.unread) == {"gen_gemm_sm100_module_cutlass_nvfp4_svdquant"}, offered.unread


def test_sm120_mxfp8_tactics_behind_flashinfer_3568(installed: FlashInferSources) -> None:
    family = read_offered(installed).family("mxfp8_gemm_cutlass_sm120")
    assert (family.arch, family.kind, family.majors) == ("sm120", "mxfp8", (12,))
    # per rendered CTA shape one tactic without and one with swap_ab, cluster 1x1x1, no stream-K:
    # FlashInfer #3568's failing tactics are among these six (their shared memory needs the compiler)
    expected = [(cta, swap) for cta in family.instantiated for swap in (False, True)]
    assert [(t.cta, t.swap_ab) for t in family.tactics] == expected
    assert {(t.cluster, t.stream_k) for t in family.tactics} == {((1, 1, 1), False)}
    assert family.tactics[4].name == "t4_128x128x128_c1x1x1"


def test_sm100_fp4_first_tactics_are_the_runners_best_indexes(installed: FlashInferSources) -> None:
    """fp4_gemm_cutlass_template.h (0.7.4) builds 4 tiles x 8 clusters, tile-major, then puts
    candidates 22, 20, 29, 4, 18 first: read by hand as (tile, cluster) of that loop."""
    family = read_offered(installed).family("fp4_gemm_cutlass")
    pairs = [(t.cta, t.cluster) for t in family.tactics]
    clusters = {t.cluster for t in family.tactics}
    assert len(set(pairs)) == 32 and len(clusters) == 8
    assert pairs[:5] == [
        ((128, 128, 256), (2, 4, 1)),
        ((128, 128, 256), (1, 4, 1)),
        ((128, 256, 256), (4, 2, 1)),
        ((128, 64, 128), (1, 4, 1)),
        ((128, 128, 256), (2, 1, 1)),
    ]


GENERATOR = """
def gen_gemm_sm120_module_cutlass_toy():
    source_paths = [jit_env.FLASHINFER_CSRC_DIR / "toy_gemm.cu"]
    dtype_list = ["half"]
    cta_m_n_k_list = [(128, 32, 128), (128, 64, 128)]
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(supported_major_versions=[12])
    return gen_jit_spec("toy_gemm", source_paths, extra_cuda_cflags=nvcc_flags)


def gen_gemm_sm100_module_cutlass_named():
    config_list = ["Tactic1Sm128x256x128Config"]
"""

RUNNER = """
// switch cases: the dispatch maps enums to shapes
switch (gemmConfig.tile_config_sm120) {
  case CutlassTileConfigSM120::CtaShape128x32x128B:
    return launch<T, cute::Int<128>, cute::Int<32>, cute::Int<128>>(D);
  case CutlassTileConfigSM120::CtaShape128x64x128B:
    DISPATCH(128, 64, 128);
}
std::vector<CutlassGemmConfig> Runner<T>::getConfigs() const {
  std::vector<CutlassTileConfigSM120> tiles = {
      CutlassTileConfigSM120::CtaShape128x32x128B, CutlassTileConfigSM120::CtaShape128x64x128B,
  };
  std::vector<ClusterShape> clusterShapes = {
      ClusterShape::ClusterShape_1x1x1, ClusterShape::ClusterShape_2x1x1};
  for (auto const& tile : tiles) {
    for (auto const& cluster : clusterShapes) {
      configs.emplace_back(tile, MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO, cluster,
                           /*swap_ab*/ true);
    }
  }
  std::vector<int64_t> best_tactics_index = {3, 9, 1};
  return configs;
}
"""


def _toy_sources(root: Path, runner: str = RUNNER) -> FlashInferSources:
    (root / "jit" / "gemm").mkdir(parents=True)
    (root / "jit" / "gemm" / "core.py").write_text(GENERATOR)
    data = root / "data"
    (data / "csrc").mkdir(parents=True)
    (data / "csrc" / "toy_gemm.cu").write_text('#include "flashinfer/gemm/toy_template.h"\n')
    (data / "include" / "flashinfer" / "gemm").mkdir(parents=True)
    (data / "include" / "flashinfer" / "gemm" / "toy_template.h").write_text(runner)
    return FlashInferSources(root=data, version="toy")


def test_reader_mirrors_get_configs_order_loops_and_reordering(tmp_path: Path) -> None:
    offered = read_offered(_toy_sources(tmp_path))
    family = offered.family("toy_gemm")
    assert (family.arch, family.kind, family.majors, family.out_dtypes) == ("sm120", "toy", (12,), ("half",))
    # tile-major, cluster inner: 0 32/1x1x1, 1 32/2x1x1, 2 64/1x1x1, 3 64/2x1x1;
    # then 3 and 1 first (9 is out of range)
    assert [t.name for t in family.tactics] == [
        "t0_128x64x128_c2x1x1_swapab",
        "t1_128x32x128_c2x1x1_swapab",
        "t2_128x32x128_c1x1x1_swapab",
        "t3_128x64x128_c1x1x1_swapab",
    ]
    assert "config_list" not in str(offered.unread) and "named" in str(offered.unread)


def test_reader_says_which_offered_tile_no_dispatch_case_instantiates(tmp_path: Path) -> None:
    runner = RUNNER.replace("DISPATCH(128, 64, 128);", "throw;").replace(
        "case CutlassTileConfigSM120::CtaShape128x64x128B:", ""
    )
    with pytest.raises(DenseSourcesError, match=r"toy_template\.h: tiles \['CtaShape128x64x128B'\] offered"):
        read_offered(_toy_sources(tmp_path, runner))


def test_reader_needs_the_package_generator_not_a_bare_data_directory(tmp_path: Path) -> None:
    with pytest.raises(DenseSourcesError, match=r"generator .*core\.py is missing"):
        read_offered(FlashInferSources(root=tmp_path / "data", version="bare"))


def test_sm103_k768_tactics_fall_back_to_a_k256_shape_on_unaligned_output(
    installed: FlashInferSources,
) -> None:
    """fp4_gemm_cutlass_template_sm103.h routes the three K768 tiles to 128x128x256 when the
    output is not aligned for 256-bit stores, whatever their N: both shapes must be rendered."""
    family = read_offered(installed).family("fp4_gemm_cutlass_sm103")
    k768 = {t.ctas for t in family.tactics if t.cta[2] == 768}
    assert k768 == {((128, 128, 256), (128, n, 768)) for n in (128, 192, 256)}
    assert all(len(t.ctas) == 1 for t in family.tactics if t.cta[2] != 768)
