"""CPU-only checks that our SM100 and SM103 code generation matches FlashInfer's own generator
(its gen_cutlass_fused_moe_sm100/sm103_module): each instantiation byte for byte, the accepted set
equal to the generator's, and the module's nvcc flags."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from types import ModuleType

import pytest
from helpers.codegen import CUDA_TYPES, INSTANTIATION_RE, base, list_value
from helpers.release_pieces import EVERY_PIECE

from pytest_tileconform.flashinfer.axes import FUSIONS
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, instantiation
from pytest_tileconform.flashinfer.configs import (
    SM100_INPUTS,
    KernelConfig,
    UnsupportedConfig,
    dynamic_clusters,
    dynamic_fallback,
    sm100_tile_k,
)
from pytest_tileconform.flashinfer.generator import instantiated_configs
from pytest_tileconform.flashinfer.nvcc_flags import (
    sm100_fused_moe_flags,
    sm100_gencode,
)
from pytest_tileconform.flashinfer.sources import (
    FlashInferSources,
)

# SM100 and SM103 (FlashInfer's gen_cutlass_fused_moe_sm100/sm103_module): every uniform and
# block-scaled input, both epilogue schedules, static and dynamic clusters, 1SM and 2SM.


@pytest.mark.parametrize(("arch", "built"), [("sm100", 1476), ("sm103", 1572)])
def test_every_sm10x_operation_matches_flashinfer(
    sources: FlashInferSources, generator: ModuleType, arch: str, built: int
) -> None:
    """Every operation becomes a configuration whose instantiation is FlashInfer's, byte for byte
    (``to_config`` compares them), the activation fusion's among them, and SM103's own kernels
    and the SM100 ones its module compiles for sm_103a alike; and codegen accepts exactly those
    among every candidate."""
    configs, skipped = instantiated_configs(sources, arch)
    assert (len(configs), skipped) == (built, [])
    assert {c.kernel_arch for c in configs} == ({0} if arch == "sm100" else {0, 100})
    assert {c.epilogue for c in configs} == ({"tma", "nosmem"})
    assert {c.dynamic_cga for c in configs} == {False, True}
    number = int(arch[2:])
    accepted = set()
    for (act, weight), out, m, n, cluster, swap, fusion, epilogue, dynamic, kernel in itertools.product(
        SM100_INPUTS,
        ("bf16", "fp16", "fp32"),
        (64, 128, 256),
        (8, 16, 32, 48, 64, 128, 192, 256),
        ((1, 1, 1), (2, 1, 1), (1, 2, 1)),
        (False, True),
        FUSIONS,
        ("tma", "nosmem"),
        (False, True),
        (0, 100),
    ):
        for k in {sm100_tile_k(act, n), 2 * sm100_tile_k(act, n)}:
            config = KernelConfig(
                number, act, weight, out, (m, n, k), cluster, swap, fusion, epilogue, dynamic, "", kernel
            )
            try:
                instantiation(config)
            except UnsupportedConfig:
                continue
            accepted.add(config)
    assert accepted == set(configs)


def test_dynamic_cga_and_nosmem_in_the_instantiation() -> None:
    config = base(arch=100, tile=(128, 64, 64), cluster=(2, 1, 1), epilogue="nosmem", dynamic_cga=True)
    text = instantiation(config)
    assert "PtrArrayNoSmemWarpSpecialized, EpilogueOpDefault, NONE" in text
    assert "false, true, false, false);" in text  # MX, DYNAMIC_CGA, BIAS, swap_ab
    assert config.name.endswith("_none_nosmem_dyncga")
    assert base(arch=100, tile=(128, 64, 64)) == base(arch=100, tile=(128, 64, 64), epilogue="tma")
    assert "Sm103, SafeFP4, SafeFP4, __nv_bfloat16" in instantiation(
        base(arch=103, act="nvfp4", weight="nvfp4", tile=(128, 128, 256))
    )
    on_sm103 = base(arch=103, act="nvfp4", weight="nvfp4", tile=(128, 128, 256), kernel_arch=100)
    assert "Sm100, SafeFP4, SafeFP4, __nv_bfloat16" in instantiation(on_sm103)
    assert on_sm103.name.endswith("_none_sm100kernel") and on_sm103.tag == 100
    # the harness text (the build cache's key) of an arch's own kernel does not change with the field
    assert "kernel_arch" not in generate_translation_unit(
        [base(arch=103, act="nvfp4", weight="nvfp4", tile=(128, 128, 256))], EVERY_PIECE
    )
    assert '"kernel_arch": 100' in generate_translation_unit([on_sm103], EVERY_PIECE)
    with pytest.raises(UnsupportedConfig, match=r"builds no sm100 kernels for it .* sm100 for sm103"):
        instantiation(base(arch=120, act="nvfp4", weight="nvfp4", tile=(128, 128, 256), kernel_arch=100))
    assert dynamic_clusters((1, 1, 1)) == ((1, 1, 1), (4, 1, 1), (4, 2, 1))
    assert dynamic_clusters((2, 1, 1)) == ((4, 1, 1), (4, 2, 1))
    assert dynamic_fallback((1, 1, 1)) == (1, 1, 1) and dynamic_fallback((4, 2, 1)) == (2, 1, 1)


@pytest.mark.parametrize(
    ("arch", "blocks_built"), [("100", {"Sm100": 1476}), ("103", {"Sm103": 96, "Sm100": 1476})]
)
def test_sm10x_generated_files_match(
    generator: ModuleType, tmp_path: Path, arch: str, blocks_built: dict[str, int]
) -> None:
    """Every block in FlashInfer's SM100 / SM103 ``*.generated.cu`` files, the activation
    fusion's included, byte for byte: read back into a configuration, codegen writes the same
    block."""
    generator.generate_gemm_operations(str(tmp_path), f"{arch};{arch}-real")
    blocks = [
        block
        for path in sorted(tmp_path.rglob("*.generated.cu"))
        for block in INSTANTIATION_RE.finditer(path.read_text())
    ]
    matched: dict[str, int] = {}
    for block in blocks:
        (tag, act, weight, out, epi, _tag, fusion, m, n, k, cm, cn, ck, mx, dyn, _bias, swap) = (
            a.strip() for a in block.group("args").split(",")
        )
        fp4 = "mxfp4" if mx == "true" else "nvfp4"
        names = {**CUDA_TYPES, "SafeFP4": fp4, "__nv_fp8_e4m3": "mxfp8" if mx == "true" else "fp8_e4m3"}
        config = KernelConfig(
            arch=int(tag[2:]),
            act=names[act],
            weight=names[weight],
            out=CUDA_TYPES[out],
            tile=(int(m), int(n), int(k)),
            cluster=(int(cm), int(cn), int(ck)),
            swap_ab=swap == "true",
            fusion=fusion.lower(),
            epilogue="nosmem" if "NoSmem" in epi else "tma",
            dynamic_cga=dyn == "true",
        )
        assert instantiation(config) == block.group(0)
        matched[tag] = matched.get(tag, 0) + 1
    assert matched == blocks_built


def test_sm100_translation_unit() -> None:
    config = base(arch=100, cluster=(2, 1, 1), fusion="finalize")
    unit = generate_translation_unit([config], EVERY_PIECE)
    assert "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm100, __nv_bfloat16" in unit
    assert "PtrArrayTmaWarpSpecialized, EpilogueOpDefault, FINALIZE" in unit
    assert "cutlass::arch::Sm100, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, " in unit
    assert "cutlass::epilogue::PtrArrayTmaWarpSpecialized, " in unit
    assert "static constexpr int arch = 100;" in unit
    assert "static constexpr int block_scale = 0;" in unit


def test_sm100_nvcc_flags_mirror_flashinfer(sources: FlashInferSources) -> None:
    package = sources.root.parent
    fused_moe = ast.parse((package / "jit" / "fused_moe.py").read_text())
    function = next(
        node
        for node in ast.walk(fused_moe)
        if isinstance(node, ast.FunctionDef) and node.name == "gen_cutlass_fused_moe_sm100_module"
    )
    assignment = next(
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "nvcc_flags"
    )
    module_flags = list_value(assignment.value, {})
    flags = sm100_fused_moe_flags((13, 0))
    assert flags[: len(module_flags)] == module_flags
    # then get_nvcc_flags_list([10, 11], map_sm107_to_100f=True) for one sm_100 device
    assert flags[len(module_flags) :] == [
        "-gencode=arch=compute_100a,code=sm_100a",
        "-DFLASHINFER_ENABLE_FP8_E8M0",
        "-DFLASHINFER_ENABLE_FP4_E2M1",
    ]
    with pytest.raises(UnsupportedConfig, match=r"12\.8"):
        sm100_gencode((12, 6))
