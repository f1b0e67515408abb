"""SM90's mixed-input MoE GEMM (W4A8 int4, W4A16 MXFP4, fp8 x MXFP4): codegen against FlashInfer's
generator, byte for byte, and the inputs' preparation against FlashInfer's own Python."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest
import torch
from helpers.release_pieces import EVERY_PIECE

from pytest_tileconform.dtypes import MIXED_INPUT_PAIRS
from pytest_tileconform.flashinfer.axes import MIXED_MAINLOOPS, MoeAxes, MoeCase
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, instantiation
from pytest_tileconform.flashinfer.configs import KernelConfig, UnsupportedConfig
from pytest_tileconform.flashinfer.generator import generated_ops, instantiated_configs, load_generator
from pytest_tileconform.flashinfer.numerics import mixed
from pytest_tileconform.flashinfer.numerics.blockscale import unpack_e2m1, unpack_int4
from pytest_tileconform.flashinfer.numerics.reference import dequantize, expected_output, make_inputs
from pytest_tileconform.flashinfer.numerics.runfiles import mixed_operands, write_inputs
from pytest_tileconform.flashinfer.problem import MIXED_PROBLEM, Problem
from pytest_tileconform.flashinfer.sources import MIXED_LAUNCHER_INL, FlashInferSources
from pytest_tileconform.matrix.cases import Case

MIXED_BLOCK_RE = re.compile(
    r"\ntemplate void sm90_generic_mixed_moe_\w+<.*?size_t\* workspace_size\);\n", re.S
)


@pytest.fixture(scope="module")
def sources(generator_sources: FlashInferSources) -> FlashInferSources:
    return generator_sources


@pytest.fixture(scope="module")
def generator(sources: FlashInferSources) -> ModuleType:
    return load_generator(sources)


def test_every_sm90_kernel_is_built_and_matches_flashinfers_files(
    sources: FlashInferSources, generator: ModuleType, tmp_path: Path
) -> None:
    """All 1,300 SM90 operations are configurations (none left out), and the 940 mixed-input
    ones are exactly the blocks of FlashInfer's ``*_Mixed_*.generated.cu`` files."""
    configs, skipped = instantiated_configs(sources, "sm90")
    assert (len(configs), skipped) == (1300, [])
    ours = sorted(instantiation(c) for c in configs if c.mixed)
    generator.generate_gemm_operations(str(tmp_path), "90;90-real")
    texts = [p.read_text() for p in sorted(tmp_path.rglob("*.generated.cu"))]
    theirs = sorted(b for t in texts if MIXED_LAUNCHER_INL in t for b in MIXED_BLOCK_RE.findall(t))
    assert len(ours) == 940
    assert ours == theirs
    assert {c.mainloop for c in configs if c.mixed} == set(MIXED_MAINLOOPS)


def test_codegen_accepts_exactly_the_generators_mixed_kernels(sources: FlashInferSources) -> None:
    configs, _ = instantiated_configs(sources, "sm90")
    accepted = set()
    for (act, weight), out, m, n, k, cluster, mainloop in itertools.product(
        MIXED_INPUT_PAIRS,
        ("bf16", "fp16", "fp32"),
        (64, 128, 256),
        (8, 16, 32, 40, 64, 128, 256),
        (64, 128, 256, 512),
        ((1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1), (4, 1, 1)),
        MIXED_MAINLOOPS,
    ):
        config = KernelConfig(90, act, weight, out, (m, n, k), cluster, True, "none", mainloop=mainloop)
        try:
            instantiation(config)
        except UnsupportedConfig:
            continue
        accepted.add(config)
    assert accepted == {c for c in configs if c.mixed}


def test_drift_names_the_mixed_kernels_by_mainloop(sources: FlashInferSources) -> None:
    variants = {op.variant for op in generated_ops(sources, "sm90") if "x" in op.dtypes.split("-")[0]}
    assert variants == set(MIXED_MAINLOOPS)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"swap_ab": False}, "swapped product only"),
        ({"fusion": "finalize"}, "no finalize epilogue"),
        ({"mainloop": ""}, "need a mainloop"),
        ({"tile": (64, 64, 128), "mainloop": "cooperative"}, "CTA M >= 128"),
        ({"mainloop": "single_warpgroup_rolling"}, "fp8 x mxfp4 only"),
        ({"out": "fp32"}, "writes fp16 or bf16"),
        ({"cluster": (4, 1, 1)}, "1 or 2 by 1 or 2"),
    ],
)
def test_codegen_refuses_what_the_mixed_launcher_cannot_build(change: dict[str, object], reason: str) -> None:
    fields: dict[str, object] = {
        "arch": 90, "act": "fp8_e4m3", "weight": "int4", "out": "bf16", "tile": (128, 64, 128),
        "cluster": (1, 1, 1), "swap_ab": True, "fusion": "none", "mainloop": "pingpong",
    }  # fmt: skip
    fields.update(change)
    with pytest.raises(UnsupportedConfig, match=reason):
        instantiation(KernelConfig(**fields))  # type: ignore[arg-type]


def test_a_mainloop_is_for_mixed_input_only() -> None:
    with pytest.raises(UnsupportedConfig, match="mixed-input kernels only"):
        instantiation(
            KernelConfig(
                90, "bf16", "bf16", "bf16", (128, 64, 64), (1, 1, 1), True, "none", mainloop="pingpong"
            )
        )
    with pytest.raises(UnsupportedConfig, match="mixed-input kernels only"):
        instantiation(
            KernelConfig(
                120, "nvfp4", "nvfp4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"
            )
        )


def test_a_mixed_unit_includes_its_launcher_and_the_interleave() -> None:
    config = KernelConfig(
        90, "bf16", "mxfp4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"
    )
    unit = generate_translation_unit([config], EVERY_PIECE)
    assert MIXED_LAUNCHER_INL in unit and "moe_gemm_mixed_utils.cu" in unit and '"harness_mixed.h"' in unit
    assert "interleave = 1;" in unit and "group = 32, scale_bytes = 1" in unit
    uniform = KernelConfig(90, "bf16", "bf16", "bf16", (128, 64, 64), (1, 1, 1), True, "none")
    with pytest.raises(ValueError, match="cannot share"):
        generate_translation_unit([config, uniform], EVERY_PIECE)


# -- inputs ------------------------------------------------------------------------------------


def mixed_case(act: str, weight: str, out: str = "bf16", problem: Problem = MIXED_PROBLEM) -> MoeCase:
    return Case(
        matrix=Path("m.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm90",
        act=act,
        weight=weight,
        out=out,
        dtype_label=f"{act}x{weight}-{out}",
        tile=(128, 64, 128),
        axes=MoeAxes(problem=problem, cluster=(1, 1, 1), swap_ab=True, fusion="none", mainloop="pingpong"),
        expectation=None,
        suite=None,
    )


def test_scale_fold_is_flashinfers() -> None:
    prepare = pytest.importorskip("flashinfer.fused_moe.prepare")
    gen = torch.Generator().manual_seed(3)
    for weight in ("int4", "mxfp4"):
        scales = mixed.random_scales(3, 128, 512, weight, gen)
        theirs = prepare.interleave_moe_scales_for_sm90_mixed_gemm(scales, mixed.group_size(weight))
        ours = mixed.fold_scales(scales, mixed.group_size(weight))
        assert ours.shape == theirs.shape and torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8))


def test_humming_offsets_are_flashinfers() -> None:
    """FlashInfer's factorization asks for a CUDA tensor only to stay on the device; its
    arithmetic is the same on the CPU."""
    prepare = pytest.importorskip("flashinfer.fused_moe.prepare")
    raw = torch.randint(120, 131, (3, 64, 16), generator=torch.Generator().manual_seed(5), dtype=torch.uint8)
    with mock.patch.object(torch.Tensor, "is_cuda", property(lambda self: True)):
        offset, residual, delta = prepare._preprocess_humming_e8m0_weight_scale(raw)
    ours_offset, ours_residual = mixed.humming_offsets(raw)
    assert torch.equal(ours_offset, offset) and torch.equal(ours_residual, residual)
    assert not bool(delta.any())  # no clamped scale: the fp4 payload stays as it is


def test_humming_offsets_refuse_a_range_that_needs_a_payload_rewrite() -> None:
    raw = torch.tensor([[[100, 112]]], dtype=torch.uint8)
    with pytest.raises(ValueError, match="span more than 11"):
        mixed.humming_offsets(raw)


def test_int4_is_twos_complement_low_nibble_first() -> None:
    packed = torch.tensor([0x81, 0x7F, 0xF0], dtype=torch.uint8)
    assert unpack_int4(packed).tolist() == [1.0, -8.0, -1.0, 7.0, 0.0, -1.0]


@pytest.mark.parametrize(("act", "weight"), MIXED_INPUT_PAIRS)
def test_the_kernels_view_of_the_operands_gives_the_reference(act: str, weight: str, tmp_path: Path) -> None:
    """Undo what the kernel is handed (fold, offsets, token scales) and compute D as the kernel
    does: it must be the reference, which uses the true scales."""
    case = mixed_case(act, weight)
    inputs = make_inputs(case, 0)
    expected = expected_output(inputs, case)
    assert expected.exact
    operands = mixed_operands(inputs)
    experts, n, k = inputs.b.shape[0], inputs.n, inputs.k
    group = mixed.group_size(weight)
    folded = operands["b_scale"]
    per_k128, cols = 128 // group, folded.shape[-1]
    unfolded = (
        folded.reshape(experts, n // 64, k // 128, 64 // (cols // per_k128), cols // per_k128, per_k128)
        .permute(0, 1, 4, 3, 2, 5)
        .reshape(experts, n, k // group)
    )
    d = torch.zeros_like(expected.value)
    alpha = inputs.alpha
    for e, rows in inputs.expert_slices():
        a = inputs.a[rows].to(torch.float64)
        if mixed.pre_mma(act, weight):
            # e4m3 weights fp4 * 2**(offset - 6), one scale per row after the MMA
            w = unpack_e2m1(inputs.b[e]).to(torch.float64)
            w = w * torch.exp2(unfolded[e].to(torch.float64) - 6).repeat_interleave(group, dim=-1)
            c = (a @ w.T) * operands["token_scales"][rows].to(torch.float64).unsqueeze(1)
        else:
            w = dequantize(inputs.b[e], weight, unfolded[e]).to(torch.float64)
            c = a @ w.T
            if weight == "int4":
                assert alpha is not None
                c = c * alpha[e].to(torch.float64)
        d[rows] = c.to(torch.float32).to(expected.out_dtype).to(torch.float64)
    assert torch.equal(d, expected.value)
    write_inputs(inputs, tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    want = {"problem.txt", "a.bin", "b.bin", "b_scale.bin"}
    want |= {"alpha.bin"} if weight == "int4" else {"token_scales.bin"} if act == "fp8_e4m3" else set()
    assert names == want


def test_mixed_problems_the_layouts_cannot_take_are_refused() -> None:
    with pytest.raises(ValueError, match="n % 64 == 0 and k % 128 == 0"):
        make_inputs(mixed_case("fp8_e4m3", "int4", problem=Problem(rows=(3, 5), n=96, k=256)), 0)
