"""CPU-only checks that our FlashInfer code generation matches FlashInfer's own generator.

FlashInfer's ``generate_kernels.py`` is loaded from the installed package on its own (with its
sibling ``cutlass_library.py``), without importing ``flashinfer``, and asked to write the SM90
instantiation files. Every MoE launcher instantiation in them must be reproduced byte for byte
by :func:`instantiation` for the KernelConfig it describes.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from helpers.codegen import CUDA_TYPES, INSTANTIATION_RE, base, list_value
from helpers.release_pieces import EVERY_PIECE

from pytest_tileconform.compile.cache import UNIT_SOURCE
from pytest_tileconform.dtypes import tile_k_elements
from pytest_tileconform.flashinfer.buildscript import build_script, harness_part
from pytest_tileconform.flashinfer.codegen import (
    HARNESS_DIR,
    HARNESS_PART,
    generate_translation_unit,
    instantiation,
)
from pytest_tileconform.flashinfer.configs import (
    SM120_INPUTS,
    SM120_MIXED_TILES,
    SM120_TILES,
    KernelConfig,
    UnsupportedConfig,
    sequence_partner,
    tile_k_bytes,
)
from pytest_tileconform.flashinfer.nvcc_flags import (
    nvcc_command,
    sm90_fused_moe_flags,
    sm120_fused_moe_flags,
    sm120_gencode,
)
from pytest_tileconform.flashinfer.sources import (
    ENV_SOURCES,
    LAUNCHER_INL,
    FlashInferSources,
    FlashInferSourcesError,
    find_cuda_home,
    find_sources,
)


@pytest.fixture(scope="module")
def sm90_generated(generator: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The ``*.generated.cu`` files FlashInfer writes for SM90 that use our launcher."""
    out = tmp_path_factory.mktemp("flashinfer_generated")
    generator.generate_gemm_operations(str(out), "90;90-real")
    texts = [p.read_text() for p in sorted(out.rglob("*.generated.cu"))]
    return [t for t in texts if f'#include "{LAUNCHER_INL}"' in t]


def config_from_macro_args(args: str) -> KernelConfig:
    (arch, act, weight, out, epi_sched, epi_tag, fusion, m, n, k, cm, cn, ck, mx, dyn, bias, swap) = (
        a.strip() for a in args.split(",")
    )
    assert (epi_sched, epi_tag, mx, dyn, bias) == ("void", "EpilogueOpDefault", "false", "false", "false")
    return KernelConfig(
        arch=int(arch.removeprefix("Sm")),
        act=CUDA_TYPES[act],
        weight=CUDA_TYPES[weight],
        out=CUDA_TYPES[out],
        tile=(int(m), int(n), int(k)),
        cluster=(int(cm), int(cn), int(ck)),
        swap_ab=swap == "true",
        fusion="finalize" if fusion == "FINALIZE" else "none",
    )


def test_every_sm90_instantiation_matches_flashinfer(sm90_generated: list[str]) -> None:
    assert sm90_generated, "FlashInfer generated no SM90 file including the MoE launcher"
    configs = []
    for text in sm90_generated:
        blocks = list(INSTANTIATION_RE.finditer(text))
        assert blocks and text.count("INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(") == len(blocks)
        for block in blocks:
            config = config_from_macro_args(block.group("args"))
            assert instantiation(config) == block.group(0)
            configs.append(config)
    # The set covers what the tests below rely on.
    assert {c.act for c in configs} == {"bf16", "fp16", "fp32", "fp8_e4m3"}
    assert {c.out for c in configs if c.act == "fp8_e4m3"} == {"bf16", "fp16"}
    assert {c.fusion for c in configs} == {"none", "finalize"}
    assert {c.swap_ab for c in configs} == {False, True}
    # FlashInfer's SM90 tiles are all 128 bytes deep (CtaShape...x128B).
    assert {tile_k_bytes(c) for c in configs} == {128}


def test_generator_operation_list_matches_files(generator: ModuleType) -> None:
    ops = generator.generate_sm90_grouped_gemm_operations(True)
    names = {
        getattr(generator.DataType, n): v
        for n, v in (("bf16", "bf16"), ("f16", "fp16"), ("f32", "fp32"), ("e4m3", "fp8_e4m3"))
    }
    fusions = {
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_none: "none",
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_finalize: "finalize",
    }
    for op in ops:
        config = KernelConfig(
            arch=op.arch,
            act=names[op.act_type],
            weight=names[op.weight_type],
            out=names[op.output_type],
            tile=tuple(op.cta_shape),
            cluster=tuple(op.cga_shape),
            swap_ab=op.swap_ab,
            fusion=fusions[op.epi_fusion],
        )
        assert instantiation(config) == generator.instantiate_operation(op)


@pytest.mark.parametrize(
    ("act", "k_elements", "k_bytes"),
    [
        ("bf16", 64, 128),
        ("fp16", 64, 128),
        ("fp32", 32, 128),
        ("fp8_e4m3", 128, 128),
        ("bf16", 128, 256),
        ("fp8_e4m3", 64, 64),
        ("nvfp4", 256, 128),
    ],
)
def test_k_conversion(act: str, k_elements: int, k_bytes: int) -> None:
    config = KernelConfig(90, act, act, "bf16", (128, 128, k_elements), (1, 1, 1), False, "none")
    assert tile_k_bytes(config) == k_bytes
    assert tile_k_elements(k_bytes, act) == k_elements


def test_macro_k_is_in_elements() -> None:
    # The macro's CTA_K_ becomes cute::Int<CTA_K_> of the MMA tile: elements, not bytes.
    config = KernelConfig(90, "fp32", "fp32", "fp32", (128, 64, 32), (2, 1, 1), True, "finalize")
    assert "128, 64, 32, 2, 1, 1," in instantiation(config)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"weight": "fp8_e4m3"}, "equal activation and weight"),
        ({"act": "nvfp4", "weight": "nvfp4"}, "equal activation and weight"),
        ({"act": "fp8_e4m3", "weight": "fp8_e4m3", "out": "fp32"}, "writes bf16 or fp16"),
        ({"out": "fp16"}, "writes bf16"),
        ({"act": "int2"}, "unknown activation dtype"),
        ({"cluster": (1, 1, 2)}, "depth 1"),
        ({"tile": (128, 0, 64)}, "positive"),
        ({"fusion": "activation"}, "fusion"),
        ({"arch": 80}, "no SM80 path"),
        ({"arch": 103}, "SM103 MoE GEMM takes nvfp4"),
        ({"arch": 103, "act": "nvfp4", "weight": "nvfp4", "tile": (128, 64, 256)}, "128x128 or 128x256"),
        ({"arch": 100, "act": "nvfp4", "weight": "mxfp4"}, "SM100 MoE GEMM takes"),
        (
            {"arch": 100, "act": "nvfp4", "weight": "nvfp4", "tile": (128, 64, 256), "epilogue": "nosmem"},
            "TMA",
        ),
        ({"arch": 100, "tile": (128, 64, 64), "fusion": "finalize", "epilogue": "nosmem"}, "finalize"),
        ({"arch": 100, "tile": (128, 64, 64), "epilogue": "smem"}, "has tma, nosmem"),
        ({"epilogue": "nosmem"}, "SM90: the launcher fixes"),
        ({"arch": 120, "act": "nvfp4", "weight": "nvfp4", "dynamic_cga": True}, "SM120: the launcher"),
        ({"arch": 100, "cluster": (1, 2, 1)}, "1x1x1 .1SM. or 2x1x1"),
        ({"arch": 100, "tile": (128, 128, 128)}, "CTA K is 64"),
        ({"arch": 100, "tile": (256, 128, 64)}, "CTA M 64/128"),
        ({"arch": 100, "tile": (128, 32, 64), "cluster": (2, 1, 1)}, "is_gemm_op_valid_sm100"),
        ({"arch": 120}, "takes nvfp4 x nvfp4, mxfp8 x mxfp4"),
        ({"arch": 121, "act": "fp8_e4m3", "weight": "mxfp4"}, "takes nvfp4 x nvfp4"),
        ({"arch": 120, "act": "nvfp4", "weight": "nvfp4", "out": "fp32"}, "writes bf16 or fp16"),
        ({"arch": 120, "act": "nvfp4", "weight": "nvfp4", "cluster": (2, 1, 1)}, "1x1x1 only"),
        ({"act": "nvfp4", "weight": "nvfp4", "tile": (128, 128, 3)}, "whole number of bytes"),
    ],
)
def test_unsupported(changes: dict[str, object], reason: str) -> None:
    with pytest.raises(UnsupportedConfig, match=reason):
        generate_translation_unit([base(**changes)], EVERY_PIECE)


def test_translation_unit_layout() -> None:
    config = base(fusion="finalize", swap_ab=True, cluster=(2, 1, 1))
    tu = generate_translation_unit([config], EVERY_PIECE, "9.9.9")
    probe = tu.index('#include "cudart_probe.h"')
    launcher = tu.index(f'#include "{LAUNCHER_INL}"')
    inst = tu.index(instantiation(config))
    harness = tu.index('#include "harness.cu"')
    table = tu.index("const tileconform::CaseEntry tileconform::kCases[] = {")
    assert probe < launcher < inst < harness < table
    assert "finalize = true" in tu
    assert "swap_ab = true" in tu
    assert f'{{"{config.name}", R"tileconform(' in tu
    assert "const int tileconform::kCaseCount = 1;" in tu
    assert "EpilogueFusion::FINALIZE, cute::Shape<cute::Int<128>, cute::Int<128>, cute::Int<64>>" in tu
    assert '"flashinfer_version": "9.9.9"' in tu
    assert (HARNESS_DIR / "harness.cu").is_file() and (HARNESS_DIR / "cudart_probe.h").is_file()


def test_a_lone_instantiation_has_its_harness_apart() -> None:
    """A unit of one instantiation: compiled without HARNESS_PART the file is FlashInfer's
    generated file (its launcher and instantiation) and the pointer the harness calls the launcher
    through; with it, the harness, naming the launcher only through that pointer: nothing of the
    kernel is instantiated there."""
    config = base()
    tu = generate_translation_unit([config], EVERY_PIECE)
    kernels, _, harness = tu.partition(f"#ifndef {HARNESS_PART}")[2].partition("#else")
    assert tu.rstrip().endswith("#endif")
    assert instantiation(config) in kernels and "harness.cu" not in kernels
    assert "INSTANTIATE_TMA" not in harness and '#include "harness.cu"' in harness
    assert "Launcher0 const case0 = &tensorrt_llm::" in kernels
    assert "extern Launcher0 const case0;" in harness
    assert "static constexpr auto& launcher = ::tileconform::launchers::case0;" in harness
    assert harness_part("tu.cu") == f'#define {HARNESS_PART} 1\n#include "../tu.cu"\n'


def test_a_shared_unit_has_its_harness_together() -> None:
    """Several instantiations share one translation unit with their harness, which calls each
    launcher directly: the harness's parse is paid once for all of them."""
    configs = [base(), base(fusion="finalize")]
    tu = generate_translation_unit(configs, EVERY_PIECE)
    assert HARNESS_PART not in tu and "tileconform::launchers" not in tu
    assert all(instantiation(c) in tu for c in configs) and '#include "harness.cu"' in tu
    assert tu.count("static constexpr auto* launcher =") == 2


@pytest.mark.parametrize("apart", [True, False])
def test_the_build_writes_the_harness_part_beside_the_objects(tmp_path: Path, apart: bool) -> None:
    """With the harness apart the build script writes :func:`harness_part` for the cache's unit
    file and compiles it with the unit (a stand-in compile keeps what it was given); together it
    compiles the unit alone. No argument holds a line break."""
    script = build_script(["nvcc", "--cudart=static", "tu.cu", "-o", "x"], tmp_path / "runtime", apart)
    assert not any("\n" in arg for arg in script)
    keep = 'printf "%s" "$*" > "$0.args"; for a; do case $a in *.cu) cat "$a" > "$0.part";; esac; done'
    compile_command = ["sh", "-c", keep, "{out}"]
    start = script.index("{out}")
    args = [*script[: start + 1], "true", *script[start + 2 : start + 5], *compile_command]
    out = tmp_path / "harness"
    done = subprocess.run([a.format(out=out) for a in args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # links by `true`, side by side
    given = Path(f"{out}.args").read_text()
    if apart:
        assert given.endswith(f"{out}.o.d/harness_part.cu -odir {out}.o.d")
        assert Path(f"{out}.part").read_text() == harness_part(UNIT_SOURCE)
    else:
        assert given == f"-odir {out}.o.d" and not Path(f"{out}.part").exists()


def test_translation_unit_of_several_cases() -> None:
    configs = [base(), base(tile=(128, 256, 64)), base(fusion="finalize"), base()]
    tu = generate_translation_unit(configs, EVERY_PIECE)
    assert "const int tileconform::kCaseCount = 3;" in tu  # the duplicate is dropped
    for i, config in enumerate(configs[:3]):
        assert instantiation(config) in tu
        assert f"struct Case{i} {{  // {config.name}" in tu
        assert f"&tileconform::run_case<tileconform::cases::Case{i}>}}," in tu
    with pytest.raises(ValueError, match="one arch"):
        generate_translation_unit([base(), base(arch=100)], EVERY_PIECE)
    with pytest.raises(ValueError, match="at least one"):
        generate_translation_unit([], EVERY_PIECE)


def test_nvcc_flags_mirror_flashinfer(sources: FlashInferSources) -> None:
    package = sources.root.parent
    names: dict[str, list[str]] = {}
    for statement in ast.parse((package / "jit" / "core.py").read_text()).body:
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            target = statement.targets[0].id
            if target in ("common_nvcc_flags", "sm90a_nvcc_flags"):
                names[target] = list_value(statement.value, names)
    fused_moe = ast.parse((package / "jit" / "fused_moe.py").read_text())
    function = next(
        node
        for node in ast.walk(fused_moe)
        if isinstance(node, ast.FunctionDef) and node.name == "gen_cutlass_fused_moe_sm90_module"
    )
    assignment = next(
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "nvcc_flags"
    )
    assert sm90_fused_moe_flags((13, 0)) == list_value(assignment.value, names)


def test_nvcc_command(sources: FlashInferSources, tmp_path: Path) -> None:
    try:
        cuda_home = find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    src, exe = tmp_path / "tu.cu", tmp_path / "harness"
    cmd = nvcc_command(base(), sources, src, exe, cuda_home)
    assert cmd[0] == str(cuda_home / "bin" / "nvcc")
    assert "-gencode=arch=compute_90a,code=sm_90a" in cmd
    assert "-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS" in cmd and "-DNDEBUG" in cmd
    assert f"-I{HARNESS_DIR}" in cmd and f"-I{sources.nv_internal}" in cmd
    assert "--cudart=static" in cmd
    assert cmd[-2:] == ["-o", str(exe)] and str(src) in cmd
    assert all(str(p) in cmd for p in sources.common_sources)


# ------------------------------------------------------------------------------------------
# SM120 / SM121 (FlashInfer's gen_cutlass_fused_moe_sm120_module)


@pytest.fixture(scope="module")
def sm120_generated(generator: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The ``*.generated.cu`` files FlashInfer writes for its SM120 module that use our launcher."""
    out = tmp_path_factory.mktemp("flashinfer_generated_sm120")
    generator.generate_gemm_operations(str(out), "120;120-real")
    texts = [p.read_text() for p in sorted(out.rglob("*.generated.cu"))]
    return [t for t in texts if f'#include "{LAUNCHER_INL}"' in t]


def sm120_config_from_macro_args(args: str, arch: int = 120) -> KernelConfig:
    (tag, act, weight, out, epi_sched, epi_tag, fusion, m, n, k, cm, cn, ck, mx, dyn, bias, swap) = (
        a.strip() for a in args.split(",")
    )
    assert (tag, epi_sched, epi_tag, dyn, bias) == ("Sm120", "void", "EpilogueOpDefault", "false", "false")
    inputs = {
        ("SafeFP4", "SafeFP4", "false"): ("nvfp4", "nvfp4"),
        ("__nv_fp8_e4m3", "SafeFP4", "true"): ("mxfp8", "mxfp4"),
    }[(act, weight, mx)]
    return KernelConfig(
        arch=arch,
        act=inputs[0],
        weight=inputs[1],
        out=CUDA_TYPES[out],
        tile=(int(m), int(n), int(k)),
        cluster=(int(cm), int(cn), int(ck)),
        swap_ab=swap == "true",
        fusion="finalize" if fusion == "FINALIZE" else "none",
    )


def test_every_sm120_instantiation_matches_flashinfer(sm120_generated: list[str]) -> None:
    assert sm120_generated, "FlashInfer generated no SM120 file including the MoE launcher"
    configs = []
    for text in sm120_generated:
        blocks = list(INSTANTIATION_RE.finditer(text))
        assert blocks and text.count("INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(") == len(blocks)
        for block in blocks:
            config = sm120_config_from_macro_args(block.group("args"))
            assert instantiation(config) == block.group(0)
            # SM121 devices run the same Sm120 instantiation (compiled for sm_121a)
            assert instantiation(KernelConfig(**{**config.__dict__, "arch": 121})) == block.group(0)
            configs.append(config)
    # Exactly the sets codegen documents (and matrices/sm120.yaml covers).
    assert {(c.act, c.weight) for c in configs} == set(SM120_INPUTS)
    assert {c.out for c in configs} == {"bf16", "fp16"}
    assert {c.fusion for c in configs} == {"none", "finalize"}
    assert {c.swap_ab for c in configs} == {False, True}
    assert {c.cluster for c in configs} == {(1, 1, 1)}
    assert {c.tile for c in configs if c.act == "nvfp4"} == set(SM120_TILES)
    assert {c.tile for c in configs if c.act == "mxfp8"} == set(SM120_MIXED_TILES)
    assert len(configs) == len(set(configs)) == (8 + 3) * 2 * 2 * 2
    # K in elements of the activation: fp4 128 elements are 64 bytes (CtaShape...x64B).
    assert {tile_k_bytes(c) for c in configs if c.act == "nvfp4"} == {64, 128}
    assert {tile_k_bytes(c) for c in configs if c.act == "mxfp8"} == {128}


def test_sm120_generator_operation_list_matches(generator: ModuleType) -> None:
    ops = generator.generate_sm120_grouped_gemm_operations(True)
    e2m1, dt = generator.e2m1, generator.DataType
    outs = {dt.bf16: "bf16", dt.f16: "fp16"}
    fusions = {
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_none: "none",
        generator.TrtLlm_EpilogueFusion.epilogue_fusion_finalize: "finalize",
    }
    assert ops
    for op in ops:
        act, weight = ("nvfp4", "nvfp4") if op.act_type == e2m1 else ("mxfp8", "mxfp4")
        assert (op.act_type == e2m1) or (op.act_type == dt.e4m3 and op.weight_type == e2m1 and op.is_mx_fpx)
        config = KernelConfig(
            arch=op.arch,
            act=act,
            weight=weight,
            out=outs[op.output_type],
            tile=tuple(op.cta_shape),
            cluster=tuple(op.cga_shape),
            swap_ab=op.swap_ab,
            fusion=fusions[op.epi_fusion],
        )
        assert instantiation(config) == generator.instantiate_operation(op)


def test_sm121_translation_unit() -> None:
    config = KernelConfig(121, "nvfp4", "nvfp4", "fp16", (128, 256, 128), (1, 1, 1), True, "finalize")
    tu = generate_translation_unit([config], EVERY_PIECE)
    assert "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM(Sm120, SafeFP4, SafeFP4, half," in tu
    assert "cutlass::arch::Sm120, tensorrt_llm::kernels::cutlass_kernels_oss::SafeFP4," in tu
    assert "static constexpr int arch = 121;" in tu  # the harness wants an sm_121 device
    assert "static constexpr int block_scale = 1;" in tu
    mixed = KernelConfig(120, "mxfp8", "mxfp4", "bf16", (128, 64, 128), (1, 1, 1), False, "none")
    assert "static constexpr int block_scale = 2;" in generate_translation_unit([mixed], EVERY_PIECE)


def test_sm120_nvcc_flags_mirror_flashinfer(sources: FlashInferSources) -> None:
    package = sources.root.parent
    fused_moe = ast.parse((package / "jit" / "fused_moe.py").read_text())
    function = next(
        node
        for node in ast.walk(fused_moe)
        if isinstance(node, ast.FunctionDef) and node.name == "gen_cutlass_fused_moe_sm120_module"
    )
    assignment = next(
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "nvcc_flags"
    )
    module_flags = list_value(assignment.value, {})
    flags = sm120_fused_moe_flags(120, (13, 0))
    assert flags[: len(module_flags)] == module_flags
    # then current_compilation_context.get_nvcc_flags_list([12]) for one sm_120 device
    assert flags[len(module_flags) :] == [
        "-gencode=arch=compute_120f,code=sm_120f",
        "-DFLASHINFER_ENABLE_FP8_E8M0",
        "-DFLASHINFER_ENABLE_FP4_E2M1",
    ]


@pytest.mark.parametrize(
    ("arch", "cuda", "gencode"),
    [(120, (13, 0), "120f"), (120, (12, 9), "120f"), (120, (12, 8), "120a"), (121, (13, 0), "121a")],
)
def test_sm120_gencode(arch: int, cuda: tuple[int, int], gencode: str) -> None:
    # CompilationContext._normalize_cuda_arch (flashinfer/compilation_context.py)
    assert sm120_gencode(arch, cuda) == f"-gencode=arch=compute_{gencode},code=sm_{gencode}"


def test_sm120_gencode_needs_cuda_12_8() -> None:
    with pytest.raises(UnsupportedConfig, match=r"12\.8"):
        sm120_gencode(120, (12, 6))
    with pytest.raises(UnsupportedConfig, match=r"12\.9"):
        sm120_gencode(121, (12, 8))


def test_sources_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: FlashInferSources
) -> None:
    for name in ("csrc", "cutlass", "cccl", "include", "spdlog"):
        (tmp_path / name).symlink_to(sources.root / name)
    (tmp_path / "VERSION").write_text("1.2.3\n")
    monkeypatch.setenv(ENV_SOURCES, str(tmp_path))
    found = find_sources()
    assert (found.root, found.version) == (tmp_path.resolve(), "1.2.3")
    assert found.generate_kernels_py is None
    # The argument wins over the environment.
    assert find_sources(sources.root).root == sources.root
    with pytest.raises(FlashInferSourcesError, match="incomplete"):
        find_sources(tmp_path / "csrc")
    monkeypatch.setenv(ENV_SOURCES, str(tmp_path / "missing"))
    with pytest.raises(FlashInferSourcesError, match="does not exist"):
        find_sources()


def test_remembered_fingerprint_follows_the_files(tmp_path: Path) -> None:
    import os

    root = tmp_path / "data"
    header = root / "csrc" / "nv_internal" / "a.h"
    header.parent.mkdir(parents=True)
    header.write_text("int a;\n")
    (root / "cutlass" / "include").mkdir(parents=True)
    (root / "cutlass" / "include" / "b.h").write_text("int b;\n")
    memo = tmp_path / "memo"
    first = FlashInferSources(root, "9.9.9").remembered_fingerprint(memo)
    assert first == FlashInferSources(root, "9.9.9").fingerprint
    assert len(list(memo.iterdir())) == 1
    assert FlashInferSources(root, "9.9.9").remembered_fingerprint(memo) == first  # from the memo
    header.write_text("int c;\n")  # same size: the new modification time tells
    os.utime(header, ns=(header.stat().st_atime_ns, header.stat().st_mtime_ns + 1_000_000))
    second = FlashInferSources(root, "9.9.9").remembered_fingerprint(memo)
    assert second != first and second == FlashInferSources(root, "9.9.9").fingerprint


def test_only_flashinfers_fc1_fc2_pair_is_paired() -> None:
    """GEMM 1 (none) and GEMM 2 (finalize) of one SM90 tile pair; a unit that holds one of them
    alone, another arch, the mixed-input launcher or another fusion pairs nothing."""
    none, finalize, other = base(), base(fusion="finalize"), base(tile=(128, 256, 64))
    assert sequence_partner(none) == finalize and sequence_partner(finalize) == none
    tu = generate_translation_unit([none, other, finalize], EVERY_PIECE)
    assert "template <> struct SequencePartner<cases::Case0> { using type = cases::Case2; };" in tu
    assert "template <> struct SequencePartner<cases::Case2> { using type = cases::Case0; };" in tu
    assert "SequencePartner<cases::Case1>" not in tu
    assert "SequencePartner<cases::" not in generate_translation_unit([none, other], EVERY_PIECE)
    sm100 = base(arch=100, tile=(128, 128, 64), cluster=(1, 1, 1))
    mixed = base(act="bf16", weight="mxfp4", out="bf16", swap_ab=True, mainloop="cooperative")
    assert sequence_partner(sm100) is None and sequence_partner(mixed) is None


@pytest.mark.parametrize("failing", ["--cudart=static", "--cudart=none"])
def test_the_build_fails_if_either_link_does(tmp_path: Path, failing: str) -> None:
    """The hardware and the virtual links run side by side; either failing fails the build."""
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f'#!/bin/sh\ncase "$*" in *{failing}*) exit 3;; esac\n')
    nvcc.chmod(0o755)
    script = build_script([str(nvcc), "--cudart=static", "tu.cu", "-o", "x"], tmp_path / "runtime", False)
    start = script.index("{out}")
    args = [*script[: start + 5], "true"]
    out = str(tmp_path / "harness")
    done = subprocess.run([a.format(out=out) for a in args], capture_output=True, text=True)
    assert done.returncode != 0
