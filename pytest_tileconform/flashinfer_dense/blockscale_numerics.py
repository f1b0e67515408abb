"""The inputs and the expected D of FlashInfer's SM90 FP8 block-scale GEMM, in the two families
of docs/numerics.md, with the MoE backend's numerics doing the bound
(:func:`..flashinfer.numerics.full.dot_interval`, :func:`~..flashinfer.numerics.full.output_interval`)
and the comparison (:func:`..flashinfer.numerics.tolerance.compare`).

What the runner computes (``fp8_blockscale_gemm_kernel.cuh``, DeepGEMM's ``fp8_gemm_impl.cuh``):
A in fp8 with a float scale per 1 x 128 along K, B in fp8 with a float scale per 128 x 128; each
128-deep slice of K summed on the tensor cores, then added into an fp32 accumulator times the
two scales; D rounded to bf16 (the binding's only runner output: FlashInfer's Python also lets
the output tensor be fp16, and the binding writes bf16 into it all the same, so a case with an
fp16 output reads the harness's D as fp16, as the caller would). A bf16 operand is quantized
by the runner first: per block, ``scale = 448 / amax`` and ``fp8(x * scale)``, its scale stored
as ``1 / scale`` (fast-math division and reciprocal, FlashInfer's ``-use_fast_math``).

* exact family: each scale block holds one element of magnitude 448 (times its scale) and the
  rest from {0, +-64, +-128} (times it): the runner's quantizer recovers those values exactly for
  bf16 operands, and given scales are powers of two. Every product is a multiple of 2**12 and a
  128-deep slice sums to under 2**10 of them, so even a 10-bit accumulator is exact; with both
  operands fp8 every sum is exact in fp32 and D must equal the reference rounded once; a bf16
  operand's stored scale is a fast reciprocal of 448 / amax, off by a few units in its last
  place, so those cases' D is checked within that error (:data:`FAST_SCALE_BITS`).
* full family (fp8 x fp8): every finite fp8 value, scales with every mantissa bit; the 128-deep
  slices are summed in the tensor cores' accumulator of :data:`SLICE_BITS` bits (DeepGEMM adds
  each into fp32 to bound that), which :func:`~..flashinfer.numerics.full.dot_interval` bounds.
  That bound (the accumulator's bits over all of K) is wide: it catches faults and gross errors,
  not a scale read from the wrong row (within 2x here), which is the exact family's to see. A bf16
  operand is quantized by the runner with a fast-math scale the reference cannot know to the fp8
  rounding, so its full family is not judged.

How the runner reads them: A M x K and B N x K, K contiguous; A's scales K/128 rows of M
padded to 4, M contiguous (what its 1x128 quantizer writes); B's scales ceil(N/128) x K/128
(128x128) or N x K/128 (1x128, the other shape FlashInfer's binding accepts), K/128 contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..flashinfer.numerics.full import EXACT, FULL, dot_interval, output_interval
from ..flashinfer.numerics.tolerance import Expected

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}
BLOCK = 128
FP8_MAX = 448.0
#: the exact family's other values (powers of two, so every product is a multiple of 64 * 64)
VALUES = (0.0, 64.0, 128.0)
#: the exact family's scales: powers of two 2**-10 .. 2**-6
SCALE_EXPONENTS = (-10, -6)
#: bits of the tensor cores' fp8 accumulator within one 128-deep slice (about 14 reported for
#: Hopper's FP8 MMA; one less for the aligning truncation)
SLICE_BITS = 13
#: relative error of a bf16 operand's stored scale (fast division then fast reciprocal, each
#: within 2 units in fp32's last place), with margin: D within 2**-19 of |A| |B|^T
FAST_SCALE_BITS = 19


@dataclass(frozen=True)
class BlockScaleInputs:
    act: str
    weight: str
    out: str
    b_per_row: bool
    family: str
    a: torch.Tensor  # M x K in the act type
    b: torch.Tensor  # N x K in the weight type
    sa: torch.Tensor | None  # M x K/128 float32 (fp8 A only)
    sb: torch.Tensor | None  # ceil(N/128) or N x K/128 float32 (fp8 B only)
    a_value: torch.Tensor  # M x K float64: what A stands for (its values times their scales)
    b_value: torch.Tensor  # N x K float64


def _block_values(rows: int, cols: int, block_rows: int, gen: torch.Generator) -> torch.Tensor:
    """rows x cols of {0, +-64, +-128}, one +-448 in each block_rows x 128 block."""
    picks = torch.tensor(VALUES, dtype=torch.float64)[
        torch.randint(0, len(VALUES), (rows, cols), generator=gen)
    ]
    signs = torch.where(torch.rand((rows, cols), generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    values = picks * signs
    for r in range(0, rows, block_rows):
        for c in range(0, cols, BLOCK):
            height, width = min(block_rows, rows - r), min(BLOCK, cols - c)
            at = int(torch.randint(0, height * width, (1,), generator=gen))
            values[r + at // width, c + at % width] = FP8_MAX * (1 if at % 2 else -1)
    return values


def _expand(scales: torch.Tensor, rows: int, cols: int, block_rows: int) -> torch.Tensor:
    return scales.repeat_interleave(block_rows, dim=0)[:rows].repeat_interleave(BLOCK, dim=1)[:, :cols]


def _operand(
    kind: str, rows: int, cols: int, block_rows: int, family: str, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(operand in its type, its scales if fp8, its value in float64) for one side."""
    shape = (-(-rows // block_rows), cols // BLOCK)
    if family == FULL:
        codes = torch.randint(0, 255, (rows, cols), generator=gen, dtype=torch.int16)
        codes = torch.where(codes == 0x7F, 0, codes)  # 0xFF is left out by randint's bound: no NaN
        q = codes.to(torch.uint8).view(torch.float8_e4m3fn)
        scales = ((1 + torch.rand(shape, generator=gen, dtype=torch.float64)) * 2.0**-4).to(torch.float32)
        value = q.to(torch.float64) * _expand(scales.to(torch.float64), rows, cols, block_rows)
        return q, scales, value
    exponents = torch.randint(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, shape, generator=gen)
    scales = torch.exp2(exponents.to(torch.float64))
    q = _block_values(rows, cols, block_rows, gen)
    value = q * _expand(scales, rows, cols, block_rows)
    if kind == "fp8_e4m3":
        return q.to(torch.float8_e4m3fn), scales.to(torch.float32), value
    # bf16: the values themselves; the runner's quantizer finds the scale 448 / amax
    return value.to(TORCH_DTYPES[kind]), None, value


def make_inputs(
    act: str, weight: str, out: str, mnk: tuple[int, int, int], b_scales: str | None, family: str, seed: int
) -> BlockScaleInputs:
    """The operands of one case's GEMM in ``family`` (on the CPU; reproducible from ``seed``)."""
    m, n, k = mnk
    if k % BLOCK:
        raise ValueError(f"K={k} is not a multiple of {BLOCK}")
    if family == FULL and not (act == weight == "fp8_e4m3"):
        raise ValueError("the full family is judged for fp8 x fp8 only (see the module's docstring)")
    if family not in (EXACT, FULL):
        raise ValueError(f"unknown input family {family!r}")
    gen = torch.Generator().manual_seed(seed)
    a, sa, a_value = _operand(act, m, k, 1, family, gen)
    b_rows = 1 if b_scales == "1x128" else BLOCK
    b, sb, b_value = _operand(weight, n, k, b_rows, family, gen)
    return BlockScaleInputs(act, weight, out, b_rows == 1, family, a, b, sa, sb, a_value, b_value)


def expected(inputs: BlockScaleInputs) -> Expected:
    """What a correct runner writes (see the module's docstring for each family's bound)."""
    out = TORCH_DTYPES[inputs.out]
    a, b = inputs.a_value, inputs.b_value
    if inputs.family == FULL:
        acc, bound = dot_interval(a, b, SLICE_BITS)
        return output_interval(acc, bound, out)
    acc = a @ b.T
    if inputs.act == inputs.weight == "fp8_e4m3":
        # exact in fp32: one rounding, to the output type
        return Expected(acc.to(torch.float32).to(out).to(torch.float64), None, out)
    return output_interval(acc, (a.abs() @ b.abs().T) * 2.0**-FAST_SCALE_BITS, out)


def _bytes(t: torch.Tensor) -> bytes:
    view = torch.uint8 if t.element_size() == 1 else (torch.int16 if t.element_size() == 2 else torch.int32)
    return t.contiguous().view(view).numpy().tobytes()


def operand_files(inputs: BlockScaleInputs) -> dict[str, bytes]:
    """``a.bin``, ``b.bin`` and the scales the runner is given (``sa.bin``, ``sb.bin``)."""
    files = {"a.bin": _bytes(inputs.a), "b.bin": _bytes(inputs.b)}
    if inputs.sa is not None:
        m = inputs.a.shape[0]
        padded = torch.zeros((inputs.sa.shape[1], -(-m // 4) * 4), dtype=torch.float32)
        padded[:, :m] = inputs.sa.T
        files["sa.bin"] = _bytes(padded)
    if inputs.sb is not None:
        files["sb.bin"] = _bytes(inputs.sb)
    return files


def read_d(data: bytes, out: str, m: int, n: int) -> torch.Tensor:
    """D as the harness wrote it (M x N, row-major, 2 bytes an element), read as ``out``."""
    if len(data) != m * n * 2:
        raise ValueError(f"D has {len(data)} bytes, not {m * n * 2}")
    return torch.frombuffer(bytearray(data), dtype=torch.int16).view(TORCH_DTYPES[out]).reshape(m, n)
