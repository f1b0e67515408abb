"""The weight-only (SM90 fpA_intB) reference on the CPU: the operand files are what the launcher
reads, a kernel computed another way (fp32 accumulation in torch's order) passes both families,
and the mistakes a layout or a scale reading makes fail them."""

from __future__ import annotations

import pytest
import torch
from helpers import trtllm_layout

from pytest_tileconform.flashinfer.numerics.full import EXACT, FULL
from pytest_tileconform.flashinfer.numerics.tolerance import compare
from pytest_tileconform.flashinfer_dense.weight_only import (
    TORCH_DTYPES,
    WeightOnlyInputs,
    exact_k_limit,
    expected,
    make_inputs,
    operand_files,
    read_d,
    stored_k,
)

#: (act, weight, group): W4A16 per group of 128, W4A16 per group of 64, W8A16 per channel
CASES = [("bf16", "int4", 128), ("fp16", "int4", 64), ("fp16", "int8", 512), ("bf16", "int8", 512)]
MNK = (37, 256, 512)


def kernel_like(inputs: WeightOnlyInputs) -> torch.Tensor:
    """D as the kernel computes it, independently of the reference's code: weights times their
    scale in the activation type, an fp32 product, rounded to the output type."""
    groups = inputs.s.repeat_interleave(inputs.group, dim=0).T  # N x K, the activation type
    b = (inputs.w.to(inputs.a.dtype) * groups).to(torch.float32)
    return (inputs.a.to(torch.float32) @ b.T).to(TORCH_DTYPES[inputs.out])


@pytest.mark.parametrize(("act", "weight", "group"), CASES)
@pytest.mark.parametrize("family", [EXACT, FULL])
def test_a_kernel_computing_in_fp32_passes(act: str, weight: str, group: int, family: str) -> None:
    inputs = make_inputs(act, weight, act, MNK, group, family, seed=1)
    report = compare(kernel_like(inputs), expected(inputs))
    assert report.ok, report.summary()
    assert report.exact == (family == EXACT)


@pytest.mark.parametrize(("act", "weight", "group"), CASES)
def test_the_exact_family_catches_one_ulp(act: str, weight: str, group: int) -> None:
    inputs = make_inputs(act, weight, act, MNK, group, EXACT, seed=2)
    d = kernel_like(inputs)
    bits = d.view(torch.int16).clone()
    bits[5, 7] += 1
    report = compare(bits.view(d.dtype), expected(inputs))
    assert not report.ok and report.over_bound == 1 and report.worst_index == (5, 7)


@pytest.mark.parametrize(("act", "weight", "group"), CASES[:3])
@pytest.mark.parametrize("family", [EXACT, FULL])
def test_scales_read_for_the_wrong_channels_fail(act: str, weight: str, group: int, family: str) -> None:
    inputs = make_inputs(act, weight, act, MNK, group, family, seed=3)
    shifted = WeightOnlyInputs(**{**vars(inputs), "s": inputs.s.roll(1, dims=1)})
    assert not compare(kernel_like(shifted), expected(inputs)).ok


@pytest.mark.parametrize("weight", ["int4", "int8"])
def test_the_weights_are_laid_out_as_tensorrt_llm_preprocesses_them_for_sm90(weight: str) -> None:
    inputs = make_inputs("bf16", weight, "bf16", (3, 64, 256), 128, EXACT, seed=4)
    assert operand_files(inputs)["b.bin"] == trtllm_layout.preprocess(inputs.w.tolist(), weight)


@pytest.mark.parametrize("weight", ["int4", "int8"])
def test_the_layout_only_moves_the_weights_along_k(weight: str) -> None:
    """The stored order is a permutation of K within each block of 32 (16) and undoes exactly."""
    order = stored_k(weight, 512)
    block = 32 if weight == "int4" else 16
    assert sorted(order.tolist()) == list(range(512)) and not torch.equal(order, torch.arange(512))
    assert torch.equal(order // block, torch.arange(512) // block)
    with pytest.raises(ValueError, match=f"multiple of the {block} rows"):
        stored_k(weight, 520)


def test_the_operand_files_are_what_the_launcher_reads() -> None:
    """A and the scales as they are (scales K/group x N); the weights biased, two int4 per byte."""
    m, n, k = MNK
    for weight, bias in (("int4", 8), ("int8", 128)):
        inputs = make_inputs("bf16", weight, "bf16", MNK, 128, EXACT, seed=4)
        files = operand_files(inputs)
        raw = torch.frombuffer(bytearray(files["b.bin"]), dtype=torch.uint8)
        if weight == "int4":
            raw = torch.stack([raw & 0xF, raw >> 4], dim=1).reshape(-1)
        stored = raw.reshape(n, k).to(torch.int16) - bias
        assert torch.equal(stored, inputs.w[:, stored_k(weight, k)])
        assert len(files["a.bin"]) == m * k * 2 and len(files["s.bin"]) == (k // 128) * n * 2
        scales = torch.frombuffer(bytearray(files["s.bin"]), dtype=torch.int16).view(torch.bfloat16)
        assert torch.equal(scales.reshape(k // 128, n), inputs.s)
    d = torch.randn(m, n).to(torch.bfloat16)
    assert torch.equal(read_d(d.view(torch.int16).numpy().tobytes(), "bf16", m, n), d)


def test_the_exact_family_refuses_a_k_it_is_not_exact_for() -> None:
    assert exact_k_limit("int8") == 8192 and exact_k_limit("int4") == 131072
    with pytest.raises(ValueError, match="exact up to K=8192"):
        make_inputs("bf16", "int8", "bf16", (1, 128, 8320), 128, EXACT, seed=0)
    with pytest.raises(ValueError, match="not a multiple"):
        make_inputs("bf16", "int4", "bf16", (1, 128, 200), 128, FULL, seed=0)
