"""The inputs and the expected D of a weight-only GEMM (SM90 fpA_intB: bf16/fp16 activations times
int4/int8 weights with a scale per output channel or per group along K), in the two families of
docs/numerics.md, with the MoE backend's numerics doing the arithmetic of the bound
(:func:`..flashinfer.numerics.full.dot_interval`, :func:`~..flashinfer.numerics.full.output_interval`)
and the comparison (:func:`..flashinfer.numerics.tolerance.compare`).

What the kernel computes (``fpA_intB_launcher_sm90.inl``, TensorRT-LLM's interleaved mixed-input
collective): each weight converted to the activation's type, multiplied by its scale in that
type (one rounding), multiplied with A on the tensor cores into an fp32 accumulator; the epilogue
``alpha * acc + bias`` with alpha 1 and no bias, rounded to the output type.

* exact family: A on a grid of quarters in [-1, 1], weights over their whole integer range,
  scales powers of two (2**-1 .. 2**1): every product and partial sum is exact in fp32 for the
  K allowed here, so D must equal the reference rounded to the output type, bit for bit;
* full family: A and the scales with every mantissa bit of their type, the weights over their
  whole range: the dequantized weight is rounded as the kernel rounds it, and the accumulator's
  freedom is :func:`~..flashinfer.numerics.full.dot_interval`'s bound.

How the launcher reads them (the operand files the harness loads): A row-major M x K; the
scales ``K/group x N``, N contiguous (``make_shape(n, scale_k)`` with the scale's packed stride);
the weights as TensorRT-LLM's ``preprocess_weights_for_mixed_gemm`` leaves them for arch 90 (its
C++ in ``cutlass_preprocessors.cpp`` and its torch twin in ``tensorrt_llm/quantization``), which
the interleaved collective (``CollectiveBuilderInterleaved``: an interleaved shared-memory view of
the weights and ``FastInterleavedAndBiasedNumericArrayConverter``) undoes on the fly. From the
K x N signed weights those steps are: the rows (K) permuted within each block of 32 (int4) or 16
(int8) so that LDSM hands each thread its elements (``permute_B_rows_for_mixed_gemm``, taken
because ``LayoutDetailsB`` gives the quantized types ``OpMultiplyAddDequantizeInterleavedBToA``
on every arch from SM75); transposed to N x K, K contiguous (``LayoutB`` column-major), two int4
per byte with the earlier element in the low nibble; no column interleave (arch 90 skips it); a
bias of 8 (int4) or 128 (int8), and the elements of each 32-bit word reordered
[0, 2, 4, 6, 1, 3, 5, 7] (int4) or [0, 2, 1, 3] (int8)
(``add_bias_and_interleave_quantized_tensor_inplace``). Without the row permutation nearly every
element of D came out wrong on the H200, whatever the bias and nibble order; with it every tactic's
D equals the reference (``results/verdicts/gemm-sm90-fpaintb-h200-2026-12-02.json.gz``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..dtypes import DTYPES
from ..flashinfer.numerics.full import EXACT, FP32_BITS, FULL, dot_interval, output_interval
from ..flashinfer.numerics.tolerance import Expected

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: the bias the launcher's unsigned weight types carry
BIAS = {"int4": 8, "int8": 128}
#: TensorRT-LLM's row permutation for 16-bit activations, within each block of K: stored row i
#: holds logical row ``ROW_PERMUTATION[w][i]`` of the block
ROW_PERMUTATION = {
    "int4": (0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11, 18, 19, 26, 27,
             4, 5, 12, 13, 20, 21, 28, 29, 6, 7, 14, 15, 22, 23, 30, 31),
    "int8": (0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15),
}  # fmt: skip
#: the order of the elements in each 32-bit word: stored element i is element ``WORD_ORDER[w][i]``
WORD_ORDER = {"int4": (0, 2, 4, 6, 1, 3, 5, 7), "int8": (0, 2, 1, 3)}
#: exact family: A's values are multiples of 2**-2 in [-1, 1]; scales 2**-1 .. 2**1
A_STEPS = 4
SCALE_EXPONENTS = (-1, 0, 1)


@dataclass(frozen=True)
class WeightOnlyInputs:
    act: str
    weight: str
    out: str
    group: int  # the launcher's group_size (K for one scale per channel)
    family: str
    a: torch.Tensor  # M x K, the activation type
    w: torch.Tensor  # N x K, int16 holding the signed integers
    s: torch.Tensor  # K/group x N, the activation type

    def dequantized(self) -> torch.Tensor:
        """N x K in float64: each weight times its scale, rounded to the activation's type as the
        kernel's conversion rounds it (the product of an integer and a scale is exact in float64)."""
        scales = self.s.to(torch.float64).repeat_interleave(self.group, dim=0)[: self.w.shape[1]].T
        return (self.w.to(torch.float64) * scales).to(self.a.dtype).to(torch.float64)


def weight_range(weight: str) -> tuple[int, int]:
    bits = DTYPES[weight].bits
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def exact_k_limit(weight: str) -> int:
    """The largest K the exact family is exact for: every partial sum is a multiple of the
    smallest product (2**-2 * 2**-1) no larger than K times the largest, within fp32's 24 bits."""
    largest = 1.0 * (1 << (DTYPES[weight].bits - 1)) * 2.0 ** max(SCALE_EXPONENTS)
    smallest = 2.0**-2 * 2.0 ** min(SCALE_EXPONENTS)
    return int(2.0**FP32_BITS * smallest / largest)


def make_inputs(
    act: str, weight: str, out: str, mnk: tuple[int, int, int], group: int, family: str, seed: int
) -> WeightOnlyInputs:
    """The operands of one case's GEMM in ``family`` (on the CPU; reproducible from ``seed``)."""
    m, n, k = mnk
    if k % group:
        raise ValueError(f"K={k} is not a multiple of the scale group {group}")
    if family == EXACT and k > exact_k_limit(weight):
        raise ValueError(f"K={k}: the exact family is exact up to K={exact_k_limit(weight)} for {weight}")
    gen = torch.Generator().manual_seed(seed)
    dtype = TORCH_DTYPES[act]
    low, high = weight_range(weight)
    w = torch.randint(low, high + 1, (n, k), generator=gen, dtype=torch.int16)
    groups = k // group
    if family == EXACT:
        a = torch.randint(-A_STEPS, A_STEPS + 1, (m, k), generator=gen).to(torch.float64) / A_STEPS
        exponents = torch.randint(min(SCALE_EXPONENTS), max(SCALE_EXPONENTS) + 1, (groups, n), generator=gen)
        s = torch.exp2(exponents.to(torch.float64))
    elif family == FULL:
        a = torch.randn((m, k), generator=gen, dtype=torch.float64)
        # every mantissa bit, around 2**-4 so that D stays well inside both output types
        s = (1 + torch.rand((groups, n), generator=gen, dtype=torch.float64)) * 2.0**-5
    else:
        raise ValueError(f"unknown input family {family!r}")
    return WeightOnlyInputs(act, weight, out, group, family, a.to(dtype), w, s.to(dtype))


def expected(inputs: WeightOnlyInputs) -> Expected:
    """What a correct kernel writes: the exact family's D exactly, the full family's within the
    accumulator's bound."""
    out = TORCH_DTYPES[inputs.out]
    a = inputs.a.to(torch.float64)
    b = inputs.dequantized()
    if inputs.family == EXACT:
        # the sum is exact in fp32 (exact_k_limit): one rounding, to the output type
        return Expected((a @ b.T).to(torch.float32).to(out).to(torch.float64), None, out)
    acc, bound = dot_interval(a, b, FP32_BITS)
    return output_interval(acc, bound, out)


def stored_k(weight: str, k: int) -> torch.Tensor:
    """For each position along K of a stored weight row, the logical k it holds: the word order
    applied to the row-permuted, transposed weights (see the module's docstring)."""
    rows, words = torch.tensor(ROW_PERMUTATION[weight]), torch.tensor(WORD_ORDER[weight])
    if k % len(rows):
        raise ValueError(f"K={k} is not a multiple of the {len(rows)} rows the {weight} layout permutes")
    j = torch.arange(k)
    permuted = j // len(rows) * len(rows) + rows[j % len(rows)]
    return permuted[j // len(words) * len(words) + words[j % len(words)]]


def operand_files(inputs: WeightOnlyInputs) -> dict[str, bytes]:
    """``a.bin``, ``b.bin`` and ``s.bin`` as the launcher reads them (little-endian)."""
    k = inputs.w.shape[1]
    stored = (inputs.w[:, stored_k(inputs.weight, k)] + BIAS[inputs.weight]).to(torch.uint8)
    if inputs.weight == "int4":
        stored = stored[:, 0::2] | (stored[:, 1::2] << 4)
    return {
        "a.bin": _raw(inputs.a.contiguous()),
        "b.bin": stored.contiguous().numpy().tobytes(),
        "s.bin": _raw(inputs.s.contiguous()),
    }


def _raw(t: torch.Tensor) -> bytes:
    return t.view(torch.int16).numpy().tobytes()


def read_d(data: bytes, out: str, m: int, n: int) -> torch.Tensor:
    """D as the harness wrote it (M x N, row-major, the output type)."""
    if len(data) != m * n * 2:
        raise ValueError(f"D has {len(data)} bytes, not {m * n * 2}")
    return torch.frombuffer(bytearray(data), dtype=torch.int16).view(TORCH_DTYPES[out]).reshape(m, n)
