"""SM90 FP8 block-scale GEMM, read from the installed FlashInfer (0.7.4): the module its generator
compiles (sources, flags for the toolkit, link flags), what its binding and Python offer, the
shipped matrix naming exactly that, the refusals of cases FlashInfer does not offer, the
reference telling the scale layouts apart, the runner's messages read into stages, and the
virtual device leaving DeepGEMM's run-time kernels to a GPU (no compile in this file)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.paths import REPO

from pytest_tileconform.dtypes import dtype_label
from pytest_tileconform.flashinfer.numerics.full import EXACT, FULL
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.flashinfer.sources import FlashInferSources, find_cuda_home, find_sources
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.backend import DenseBackend
from pytest_tileconform.flashinfer_dense.blockscale import (
    BlockScaleModule,
    check_case,
    read_module,
    unit_source,
)
from pytest_tileconform.flashinfer_dense.blockscale_hardware import BlockScaleReport
from pytest_tileconform.flashinfer_dense.blockscale_numerics import (
    BLOCK,
    BlockScaleInputs,
    expected,
    make_inputs,
    operand_files,
)
from pytest_tileconform.flashinfer_dense.unit import NotOffered
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.verdict import NotJudgeable, Stage

MATRIX = REPO / "matrices" / "gemm-sm90-fp8blockscale.yaml"


@pytest.fixture(scope="module")
def installed() -> FlashInferSources:
    return find_sources()


@pytest.fixture(scope="module")
def module(installed: FlashInferSources) -> BlockScaleModule:
    return read_module(installed, (13, 0))


def case(
    act: str = "fp8_e4m3",
    weight: str = "fp8_e4m3",
    out: str = "bf16",
    arch: str = "sm90",
    dispatch: str = "static",
    b_scales: str | None = "128x128",
    mnk: tuple[int, int, int] = (200, 512, 512),
) -> Case[DenseAxes]:
    axes = DenseAxes(False, mnk, dispatch=dispatch, b_scales=b_scales)
    return Case(Path("m.yaml"), "dense", arch, act, weight, out, "x", (128, 128, 128), axes, None, None)


def test_the_module_is_what_its_generator_compiles(module: BlockScaleModule) -> None:
    assert module.name == "fp8_blockscale_gemm_90"
    # the runner's source is included by the unit; the TVM-FFI binding and JIT setup are the harness's
    assert module.runner == "fp8_blockscale_gemm/fp8_blockscale_gemm.cu"
    assert [p.name for p in module.sources] == [
        "envUtils.cpp", "logger.cpp", "stringUtils.cpp", "tllmException.cpp", "memoryUtils.cu",
    ]  # fmt: skip
    assert module.binding.name == "fp8_blockscale_gemm_sm90_binding.cu"
    assert module.flags[0] == "-gencode=arch=compute_90a,code=sm_90a"
    assert {"-DCOMPILE_HOPPER_TMA_GEMMS", "-DENABLE_FP8_BLOCK_SCALE"} <= set(module.flags)
    assert module.ldflags == ("-lnvrtc", "-lcuda")
    assert f'#include "{module.runner}"' in unit_source(module, "0.7.4")


def test_the_block_scale_flag_follows_the_toolkit_as_its_condition_says(installed: FlashInferSources) -> None:
    assert "-DENABLE_FP8_BLOCK_SCALE" not in read_module(installed, (12, 6)).flags


def test_what_the_binding_and_python_offer(module: BlockScaleModule) -> None:
    assert module.pairs == (
        ("bf16", "bf16", "bf16"), ("bf16", "fp8_e4m3", "bf16"), ("fp8_e4m3", "fp8_e4m3", "bf16"),
    )  # fmt: skip
    assert module.outs == ("bf16", "fp16")


def test_the_shipped_matrix_covers_every_pair_output_scale_and_dispatch(
    pytester: pytest.Pytester, module: BlockScaleModule
) -> None:
    pytester.makefile(".yaml", **{MATRIX.stem: MATRIX.read_text()})
    collected = pytester.runpytest_subprocess("--tile-matrix", MATRIX.name, "--collect-only", "-q")
    ids = [line.split("::")[1] for line in collected.outlines if "::" in line]
    offered = {
        (dtype_label(a, w, out), dispatch, scales)
        for a, w, _ in module.pairs
        for out in module.outs
        for scales in (("sb128x128", "sb1x128") if w == "fp8_e4m3" else (None,))
        for dispatch in ("deepgemm", "static")
    }
    words = [re.fullmatch(r"sm90-(.+)-128x128x128-(deepgemm|static)(?:-(sb\w+))?-m\w+", i) for i in ids]
    assert None not in words
    named = {m.groups() for m in words if m}
    assert named == offered
    # the problems that reach DeepGEMM's paths: swapped (M < 32), block M 128, multicast (M >= 1024)
    assert {i.rsplit("-", 1)[1] for i in ids} == {"m16n512k512", "m200n512k512", "m1024n512k512"}


def test_what_flashinfer_does_not_offer_is_refused(module: BlockScaleModule) -> None:
    check_case(module, case())
    for refused, said in (
        (case(arch="sm100"), "sm90 only"),
        (case(out="fp32"), "not fp8_e4m3 x fp8_e4m3 -> fp32"),
        (case(act="bf16", weight="bf16"), "quantized by the runner"),
        (case(b_scales=None), "come with their scales"),
        (case(mnk=(200, 96, 512)), "N=96"),
        (case(mnk=(200, 512, 320)), "K=320"),
    ):
        with pytest.raises(NotOffered, match=said):
            check_case(module, refused)


def test_deepgemm_is_left_to_a_gpu_and_the_static_dispatch_planned(
    backend_settings: Callable[..., Any],
) -> None:
    backend = DenseBackend(backend_settings(device="virtual"), None, lambda _message: None)
    with pytest.raises(NotJudgeable, match="driver"):
        backend.judge(case(dispatch="deepgemm"))
    backend.__dict__["toolchain"] = (find_cuda_home(), Path("/x/libvcudart.a"), "salt")
    planned = backend._unit(case(), "virtual")
    assert planned.args[:2] == ("static", "fp8_e4m3") and "-DTILECONFORM_VIRTUAL" in planned.spec.command
    assert (
        planned.spec.key == backend._unit(case(act="bf16", weight="bf16", b_scales=None), "virtual").spec.key
    )


def _block_read(inputs: BlockScaleInputs) -> torch.Tensor:
    """D as a kernel that reads B's scales per 128 rows computes it (its rows' first scales)."""
    assert inputs.sb is not None
    b_q = inputs.b.to(torch.float64)
    scales = inputs.sb.to(torch.float64)[: -(-b_q.shape[0] // BLOCK)]
    b = b_q * scales.repeat_interleave(BLOCK, 0)[: b_q.shape[0]].repeat_interleave(BLOCK, 1)
    return (inputs.a_value @ b.T).to(torch.bfloat16)


def test_the_exact_family_tells_per_row_weight_scales_from_per_block() -> None:
    per_block = make_inputs("fp8_e4m3", "fp8_e4m3", "bf16", (64, 256, 512), "128x128", EXACT, 1)
    assert compare(_block_read(per_block), expected(per_block)).ok
    per_row = make_inputs("fp8_e4m3", "fp8_e4m3", "bf16", (64, 256, 512), "1x128", EXACT, 1)
    assert not compare(_block_read(per_row), expected(per_row)).ok
    # the full family's bound (a 13-bit accumulator over all of K) is too wide to see it: it is
    # there for faults and gross errors, the exact family for the scales
    full = make_inputs("fp8_e4m3", "fp8_e4m3", "bf16", (64, 256, 512), "1x128", FULL, 1)
    assert compare(_block_read(full), expected(full)).ok


def test_the_operands_are_laid_out_as_the_runner_reads_them() -> None:
    inputs = make_inputs("fp8_e4m3", "fp8_e4m3", "bf16", (6, 256, 384), "1x128", EXACT, 2)
    files = operand_files(inputs)
    # A's scales: K/128 rows of M padded to 4; B's: one row of K/128 per weight row
    assert {k: len(v) for k, v in files.items()} == {
        "a.bin": 6 * 384, "b.bin": 256 * 384, "sa.bin": 3 * 8 * 4, "sb.bin": 256 * 3 * 4,
    }  # fmt: skip
    sa = torch.frombuffer(bytearray(files["sa.bin"]), dtype=torch.float32).reshape(3, 8)
    assert inputs.sa is not None and torch.equal(sa[:, :6], inputs.sa.T) and not sa[:, 6:].any()
    assert expected(inputs).exact
    bf16 = make_inputs("bf16", "bf16", "bf16", (6, 256, 384), None, EXACT, 2)
    assert set(operand_files(bf16)) == {"a.bin", "b.bin"} and not expected(bf16).exact
    with pytest.raises(ValueError, match="fp8 x fp8 only"):
        make_inputs("bf16", "bf16", "bf16", (6, 256, 384), None, FULL, 2)


@pytest.mark.parametrize(
    ("message", "stage"),
    [
        ("Assertion failed: cudaFuncSetAttribute(kernel, ...) == cudaSuccess", Stage.INITIALIZE),
        ("Assertion failed: status == cudaSuccess", Stage.LAUNCH),
        ("launch refused: too many resources requested for launch", Stage.LAUNCH),
        ("Assertion failed: !cubin.empty() || isPathValid(path_)", Stage.COMPILE),
        ("fp8 blockscale gemm only supported on Hopper.", None),
    ],
)
def test_the_runners_messages_are_read_into_stages(message: str, stage: Stage | None) -> None:
    report = BlockScaleReport({"outcome": "threw", "message": message})
    assert report.stage is stage
    assert report.status == ("too many resources requested for launch" if "refused" in message else "")


def test_a_deepgemm_case_on_the_virtual_device_is_skipped_saying_why(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".yaml",
        m="""
version: 1
backend: flashinfer-cutlass-dense
defaults: {arch: sm90, swap_ab: [false], mnk: [200x512x512]}
suites:
  - name: w8a8
    dtype: {act: fp8_e4m3, weight: fp8_e4m3, out: bf16}
    dispatch: [deepgemm]
    b_scales: [128x128]
    tile: [128x128x128]
""",
    )
    cache = pytester.path / "cache"
    result = pytester.runpytest_subprocess(
        "--tile-matrix", "m.yaml", "--tile-device", "virtual", "--tile-cache-dir", str(cache), "-rs"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*DeepGEMM's dispatch compiles its kernel with nvcc*judged on a GPU*"])
    assert not list(cache.glob("*/*/harness"))  # nothing was built for it
