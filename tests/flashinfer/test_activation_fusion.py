"""The activation fusion (SM100 ``EpilogueFusion::ACTIVATION``): a matrix asks for it, the plugin
builds exactly FlashInfer's set and refuses the rest with the reason; the harness's files for it;
and the reference (ClampedRelu2 of ``alpha * acc``; MXFP8 D with ue8m0 scales per 32), checked
on the CPU with hand-checkable values and against a CPU emulation of a correct kernel, which
wrong kernels (a rounding, a scale, the scale layout) must fail."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from helpers.release_pieces import EVERY_PIECE
from helpers.stand_in_flashinfer import QUIET, STAND_IN_CONFTEST, STAND_IN_NVCC, make_sources

from pytest_tileconform.flashinfer.axes import MoeAxes, MoeCase
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, instantiation
from pytest_tileconform.flashinfer.configs import (
    ACTIVATION_CLUSTERS,
    ACTIVATION_TILES_MN,
    ACTIVATION_TYPES,
    KernelConfig,
    UnsupportedConfig,
    sm100_tile_k,
)
from pytest_tileconform.flashinfer.generator import instantiated_configs
from pytest_tileconform.flashinfer.numerics import activation
from pytest_tileconform.flashinfer.numerics.blockscale import act_sf_offset, swizzle_block_scales
from pytest_tileconform.flashinfer.numerics.reference import (
    GroupedInputs,
    expected_output,
    make_inputs,
    reference_rows,
)
from pytest_tileconform.flashinfer.numerics.runfiles import (
    output_bytes,
    read_output,
    read_output_scales,
    write_inputs,
)
from pytest_tileconform.flashinfer.numerics.tolerance import Expected, compare
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.flashinfer.sources import (
    ENV_SOURCES,
    FlashInferSources,
)
from pytest_tileconform.matrix.cases import Case

# -- the plugin: a matrix with the activation fusion ----------------------------------------

MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
defaults:
  fusion: activation
  problems: {experts: 2, rows: [0, 40], n: 64, k: 64}
suites:
  - arch: sm100
    dtype: bf16
    tile: [128x64x64, 64x64x64]
  - arch: sm90
    dtype: bf16
    tile: [128x64x64]
"""


@pytest.fixture
def host(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("CI", "CUDA_VISIBLE_DEVICES", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / "fi-data")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    (pytester.path / "m.yaml").write_text(MATRIX)
    monkeypatch.setenv("STAND_IN_CODEGEN", "1")  # builds go through codegen
    monkeypatch.setenv("STAND_IN_HOST", "1")
    (pytester.path / "stand_in_nvcc.py").write_text(STAND_IN_NVCC)
    pytester.makeconftest(STAND_IN_CONFTEST)
    return pytester


def test_a_matrix_asks_for_the_activation_fusion(host: pytest.Pytester) -> None:
    """The ids carry the fusion; the one FlashInfer builds compiles, the two it does not are
    refused by codegen, each with its reason."""
    args = ("--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-report", "r.json", *QUIET)
    result = host.runpytest(*args)
    assert result.parseoutcomes() == {"unrun": 1, "failed": 2}, result.stdout.str()
    report = json.loads((host.path / "r.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
    assert set(verdicts) == {
        "sm100-bf16-128x64x64-c1x1x1-activation",
        "sm100-bf16-64x64x64-c1x1x1-activation",
        "sm90-bf16-128x64x64-c1x1x1-activation",
    }
    assert verdicts["sm100-bf16-128x64x64-c1x1x1-activation"]["failed_stage"] is None
    assert "CTA 128x64, 128x128, 128x256" in verdicts["sm100-bf16-64x64x64-c1x1x1-activation"]["detail"]
    assert "only, got Sm90" in verdicts["sm90-bf16-128x64x64-c1x1x1-activation"]["detail"]
    built = next((host.path / "cache").rglob("*.cu")).read_text()
    assert "EpilogueOpDefault, ACTIVATION," in built


# -- codegen: exactly the generator's set --------------------------------------------------

#: FlashInfer's bf16 activation-fusion kernel of CTA 128x64, as KernelConfig fields
BF16: dict[str, object] = dict(
    arch=100,
    act="bf16",
    weight="bf16",
    out="bf16",
    tile=(128, 64, 64),
    cluster=(1, 1, 1),
    swap_ab=False,
    fusion="activation",
)


def test_activation_fusion_is_the_generators_set(sources: FlashInferSources) -> None:
    """The activation-fusion kernels are exactly configs.py's data: ACTIVATION_TILES_MN x
    ACTIVATION_CLUSTERS x static/dynamic x ACTIVATION_TYPES, TMA epilogue, no swap_ab."""
    configs, _ = instantiated_configs(sources, "sm100")
    got = {c for c in configs if c.fusion == "activation"}
    want = {
        KernelConfig(
            100, act, weight, out, (m, n, sm100_tile_k(act, n)), cluster, False, "activation", "tma", dyn
        )
        for (m, n), cluster, dyn, (act, weight, out) in itertools.product(
            ACTIVATION_TILES_MN, ACTIVATION_CLUSTERS, (True, False), ACTIVATION_TYPES
        )
    }
    assert got == want and len(got) == 36


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"arch": 103, "act": "nvfp4", "weight": "nvfp4", "tile": (128, 128, 256)}, "only, got Sm103"),
        ({"swap_ab": True}, "swap_ab false"),
        ({"epilogue": "nosmem"}, "TMA epilogue only"),
        ({"act": "fp8_e4m3", "weight": "fp8_e4m3", "tile": (128, 128, 128)}, "activation fusion takes"),
        ({"act": "mxfp8", "weight": "mxfp4"}, "activation fusion takes"),
        ({"tile": (128, 32, 64)}, "CTA 128x64, 128x128, 128x256"),
        ({"tile": (64, 64, 64)}, "CTA 128x64, 128x128, 128x256"),
        ({"fusion": "gelu"}, "is not one of 'none', 'finalize', 'activation'"),
    ],
)
def test_activation_refusals(changes: dict[str, object], reason: str) -> None:
    fields: dict[str, object] = {**BF16, "tile": (128, 128, 64), **changes}
    with pytest.raises(UnsupportedConfig, match=reason):
        instantiation(KernelConfig(**fields))  # type: ignore[arg-type]


def test_activation_translation_unit() -> None:
    """ACTIVATION in the instantiation; the case struct gives D's bits (the activation type's)
    and marks an MXFP8 D, whose scales the harness allocates."""
    mx = KernelConfig(100, "mxfp8", "mxfp8", "fp16", (128, 64, 128), (1, 1, 1), False, "activation")
    unit = generate_translation_unit([mx], EVERY_PIECE)
    assert "PtrArrayTmaWarpSpecialized, EpilogueOpDefault, ACTIVATION" in unit
    assert "EpilogueFusion::ACTIVATION" in unit
    assert "act_bits = 8, weight_bits = 8, out_bits = 8;" in unit
    assert "finalize = false, activation = true;" in unit and "d_scaled = true;" in unit
    assert mx.name == "sm100_mxfp8_mxfp8_fp16_128x64x128_1x1x1_activation"
    plain = generate_translation_unit([KernelConfig(**BF16)], EVERY_PIECE)  # type: ignore[arg-type]
    assert "out_bits = 16;" in plain and "d_scaled = false;" in plain


# -- ClampedRelu2, by hand ------------------------------------------------------------------


def test_clamped_relu2_by_hand() -> None:
    """(L tanh(relu(v) / L))^2 with L = 2: 0 for v <= 0, 1 where tanh(v / 2) = 1/2, L^2 = 4
    saturated."""
    v = torch.tensor([-3.0, 0.0, 2 * math.atanh(0.5), 100.0], dtype=torch.float64)
    f = activation.clamped_relu2(v, 2.0)
    assert torch.allclose(f, torch.tensor([0.0, 0.0, 1.0, 4.0], dtype=torch.float64), rtol=1e-15, atol=0)
    assert activation.clamp_limit(512) == 16.0 and activation.clamp_limit(64) == 8.0


def test_bf16_d_is_an_interval_of_one_value_away_from_boundaries() -> None:
    """f = 1: 1 -/+ 2^-10 rounds to 1 in bf16 (spacing 2^-8 below, 2^-7 above), so D must be 1;
    a kernel off by one bf16 ulp fails."""
    v = torch.tensor([[2 * math.atanh(0.5), -1.0]], dtype=torch.float64)
    expected = activation.expected_activation(v, 2.0, "bf16")
    assert compare(torch.tensor([[1.0, 0.0]], dtype=torch.bfloat16), expected).ok
    assert not compare(torch.tensor([[1.0078125, 0.0]], dtype=torch.bfloat16), expected).ok
    assert not compare(torch.tensor([[1.0, 2.0**-20]], dtype=torch.bfloat16), expected).ok


def test_mxfp8_scales_by_hand() -> None:
    """A block whose amax is 448 needs scale 1, or 2 if the kernel's fp32 amax came out a hair
    above it; amax 300 needs scale 1 only (300/448 rounded up); an all-zero block byte 0."""
    f = torch.zeros(1, 96, dtype=torch.float64)
    f[0, 5], f[0, 40], f[0, 33] = 448.0, 300.0, 3.0
    low, high = activation.scale_bytes(f)
    assert low.tolist() == [[127, 127, 0]] and high.tolist() == [[128, 127, 0]]


def test_mxfp8_d_given_the_kernels_scales() -> None:
    """amax 300 with scale 2^0: D = RN_e4m3(300) = 288 (spacing 32), 3 -> 3; another D value
    fails, and so does a scale no correct kernel writes (its block expects inf)."""
    f = torch.zeros(1, 32, dtype=torch.float64)
    f[0, 0], f[0, 1] = 300.0, 3.0
    pre = Expected(f, f * activation.RELU2_REL_ERROR, torch.float8_e4m3fn, scaled=True)
    with pytest.raises(ValueError, match="with_scales first"):
        compare(f.to(torch.float8_e4m3fn), pre)
    good = activation.with_scales(pre, torch.tensor([[127]], dtype=torch.uint8))
    d = torch.zeros(1, 32, dtype=torch.float64)
    d[0, 0], d[0, 1] = 288.0, 3.0
    assert compare(d.to(torch.float8_e4m3fn), good).ok
    d[0, 0] = 320.0
    assert not compare(d.to(torch.float8_e4m3fn), good).ok
    wrong_scale = activation.with_scales(pre, torch.tensor([[128]], dtype=torch.uint8))
    halved = torch.zeros(1, 32, dtype=torch.float64)
    halved[0, 0], halved[0, 1] = 144.0, 1.5
    report = compare(halved.to(torch.float8_e4m3fn), wrong_scale)
    assert not report.ok and report.over_bound == 32


# -- the files and a correct kernel, emulated ----------------------------------------------

PROBLEM = Problem(experts=3, rows=(0, 5, 130), n=96, k=128)


def activation_case(act: str, out: str, problem: Problem = PROBLEM) -> MoeCase:
    return Case(
        matrix=Path("m.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm100",
        act=act,
        weight=act,
        out=out,
        dtype_label=act if act == out else f"{act}-{out}",
        tile=(128, 64, 128),
        axes=MoeAxes(problem=problem, cluster=(1, 1, 1), swap_ab=False, fusion="activation"),
        expectation=None,
        suite=None,
    )


def kernel_d(inputs: GroupedInputs, *, swizzle: bool = True) -> bytes:
    """d.bin as a correct kernel leaves it, emulated in fp32 on the CPU: ClampedRelu2 with
    torch's fp32 tanh; for MXFP8 amax * fp32(1/448) rounded up to a power of two and D
    RN_satfinite_e4m3(y / scale), the scales at TensorRT-LLM's offsets (``swizzle`` False:
    a kernel that writes them unswizzled)."""
    assert inputs.clamp_limit is not None
    v = reference_rows(inputs).to(torch.float32)
    limit = torch.tensor(inputs.clamp_limit, dtype=torch.float32)
    y = (limit * torch.tanh(v.clamp(min=0) / limit)) ** 2
    if inputs.d == "bf16":
        return y.to(torch.bfloat16).view(torch.uint8).numpy().tobytes()
    rows, n = y.shape
    amax = y.reshape(rows, n // 32, 32).amax(-1) * torch.tensor(1 / 448, dtype=torch.float32)
    byte = activation._ue8m0_ceil(amax.to(torch.float64))
    inverse = torch.ldexp(torch.ones_like(amax), 127 - byte).repeat_interleave(32, dim=1)
    d = (y * inverse).clamp(max=448).to(torch.float8_e4m3fn).view(torch.uint8)
    flat = torch.zeros(act_sf_offset(inputs.experts, inputs.total_rows, n, 32), dtype=torch.uint8)
    for e, rows_of in inputs.expert_slices():
        if rows_of.stop == rows_of.start:
            continue
        linear = byte[rows_of].to(torch.uint8)
        sf = swizzle_block_scales(linear) if swizzle else linear.reshape(-1)
        start = act_sf_offset(e, rows_of.start, n, 32)
        flat[start : start + sf.numel()] = sf
    return d.numpy().tobytes() + flat.numpy().tobytes()


def check(tmp_path: Path, case: MoeCase, inputs: GroupedInputs, data: bytes) -> bool:
    (tmp_path / "d.bin").write_bytes(data)
    expected = expected_output(inputs, case)
    scales = read_output_scales(tmp_path, inputs)
    if scales is not None:
        expected = activation.with_scales(expected, scales)
    return compare(read_output(tmp_path, inputs), expected).ok


@pytest.mark.parametrize(("act", "out"), [("bf16", "bf16"), ("mxfp8", "fp16")])
def test_a_correct_kernel_passes_and_wrong_ones_fail(tmp_path: Path, act: str, out: str) -> None:
    case = activation_case(act, out)
    inputs = make_inputs(case, seed=7)
    assert inputs.d == act and inputs.clamp_limit == activation.clamp_limit(PROBLEM.k)
    write_inputs(inputs, tmp_path)
    limit = torch.frombuffer(bytearray((tmp_path / "clamp_limit.bin").read_bytes()), dtype=torch.float32)
    assert limit.tolist() == [inputs.clamp_limit]
    data = kernel_d(inputs)
    assert len(data) == output_bytes(inputs)
    assert check(tmp_path, case, inputs, data)
    size = 2 if act == "bf16" else 1
    d_bytes = PROBLEM.n * inputs.total_rows * size
    wrong = bytearray(data)
    index = next(i for i in range(0, d_bytes, size) if 0 < data[i] < 0x7F)
    wrong[index] += 1  # one nonzero element one unit in the last place up (its low byte)
    assert not check(tmp_path, case, inputs, bytes(wrong))
    if act == "mxfp8":
        assert not check(tmp_path, case, inputs, kernel_d(inputs, swizzle=False))
        sf_wrong = bytearray(data)
        sf_wrong[d_bytes + act_sf_offset(1, 0, PROBLEM.n, 32)] += 1  # expert 1's first scale
        assert not check(tmp_path, case, inputs, bytes(sf_wrong))


def test_an_mxfp8_d_needs_n_in_scale_blocks() -> None:
    case = activation_case("mxfp8", "bf16", Problem(experts=1, rows=(4,), n=80, k=64))
    with pytest.raises(ValueError, match="N=80 is not a multiple of the output scale block 32"):
        make_inputs(case, seed=0)
