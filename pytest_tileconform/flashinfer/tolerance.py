"""Numerics policy: when does the kernel's D match the torch reference.

An element is bad when ``|actual - expected| > atol * scale + rtol * |expected|``, where
``scale`` is the RMS of the whole expected tensor (1 where it is all zero). Scaling atol by
the output's RMS makes the policy independent of K and of how large the generated values are;
it is what TensorRT-LLM's ``max(tol, tol * |ref|)`` amounts to for its O(1) outputs, and it
covers finalize, where rows add up to a small sum but each add rounds at the size of the rows.
A case passes when no element is NaN/Inf and at most ``floor(max_bad_fraction * total)``
elements are bad.

Sources of the numbers (one ``tol`` per type, used as both atol and rtol):

* TensorRT-LLM ``cpp/tests/unit_tests/kernels/mixtureOfExpertsTest.cu``,
  ``MixtureOfExpertsTest::getTolerance`` (current main), checked with
  ``ASSERT_NEAR(expected, actual, getTolerance(expected))`` i.e.
  ``|d - ref| <= max(tol, tol * |ref|)``: float 0.001, half 0.005, bf16 0.05,
  fp8 0.06 (0.001 only for ReLU without bias and power-of-two diagonal weights),
  NVFP4 0.05, MXFP8xMXFP4 / FP8xMXFP4 0.1 (0.01 for ReLU without bias). Those cover a whole
  MoE (two GEMMs, activation, bias), so they are upper bounds for one GEMM.
* FlashInfer ``tests/moe/test_trtllm_cutlass_fused_moe.py``: ``torch.testing.assert_close``
  with ``rtol=atol=1e-2`` for fp16/bf16 (``test_moe``, ``test_moe_gelu_tanh``) and
  ``rtol=atol=1e-1`` for fp8 (``test_moe_fp8``).
* The rounding bound of this test: inputs are exact in their types and the fp32 accumulation
  is exact (see reference.py), so without fusion the only error is the conversion to the
  output type, half an ulp: 2**-9 = 1.95e-3 of |ref| for bf16, 2**-11 = 4.9e-4 for fp16,
  2**-24 for fp32. Finalize adds one such rounding per row added into a token (<= ~8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..matrix.cases import Case


@dataclass(frozen=True)
class Tolerance:
    """``atol`` (in units of the expected output's RMS), ``rtol`` and the bad-element budget."""

    atol: float
    rtol: float
    max_bad_fraction: float
    source: str = ""

    def allowed_bad(self, total: int) -> int:
        """How many of ``total`` elements may be bad."""
        return math.floor(self.max_bad_fraction * total + 1e-9)


#: Per input type (act or weight) tol.
INPUT_TOL: dict[str, tuple[float, str]] = {
    # TRT-LLM getTolerance float = 0.001; TF32 or fp32 MMA on exact inputs is exact here.
    "fp32": (1e-3, "TRT-LLM getTolerance(float)=0.001"),
    # TRT-LLM getTolerance(half)=0.005 (FlashInfer uses 1e-2 for a whole MoE); 10x the
    # fp16 half-ulp 4.9e-4.
    "fp16": (5e-3, "TRT-LLM getTolerance(half)=0.005"),
    # FlashInfer rtol=atol=1e-2 (TRT-LLM's 0.05 covers two GEMMs + activation + bias);
    # 5x the bf16 half-ulp 1.95e-3.
    "bf16": (1e-2, "FlashInfer assert_close bf16 rtol=atol=1e-2"),
    # TRT-LLM getTolerance fp8 loose = 0.06 (FlashInfer test_moe_fp8 uses 0.1). Leaves room
    # for Hopper's reduced-precision fp8 accumulation; outputs are bf16/fp16.
    "fp8_e4m3": (6e-2, "TRT-LLM getTolerance(fp8, loose)=0.06"),
    # Block-scaled inputs are generated exactly like the others (grid values, power-of-two
    # block scales: reference.py), so only the alpha scaling and the output conversion round.
    # These bounds are TRT-LLM's and not yet confirmed here: no block-scaled kernel's output has
    # been checked (virtual verdicts stop at launch; no SM100/SM120 GPU has run one).
    # TRT-LLM NVFP4 = 0.05.
    "nvfp4": (5e-2, "TRT-LLM getTolerance(NVFP4)=0.05 (unconfirmed on hardware)"),
    # TRT-LLM MXFP8xMXFP4 / FP8xMXFP4 loose = 0.1.
    "mxfp8": (1e-1, "TRT-LLM getTolerance(MXFP8_MXFP4, loose)=0.1 (unconfirmed on hardware)"),
    "mxfp4": (1e-1, "TRT-LLM getTolerance(MXFP8_MXFP4, loose)=0.1 (unconfirmed on hardware)"),
}
#: Per output type tol: the output rounding alone must never exceed these (same sources).
OUTPUT_TOL: dict[str, float] = {"fp32": 1e-3, "fp16": 5e-3, "bf16": 1e-2}
#: Bad-element budget: 0.1% of elements for reduced-precision types (rare outliers, e.g.
#: fp8 fast accumulation or atomics in finalize); none when everything is fp32.
BAD_FRACTION = 1e-3
BAD_FRACTION_FP32 = 0.0


def policy_for(case: Case) -> Tolerance:
    """The tolerance for a case: the loosest of its act, weight and output types."""
    try:
        candidates = [INPUT_TOL[case.act], INPUT_TOL[case.weight]]
        out_tol = OUTPUT_TOL[case.out]
    except KeyError as exc:
        raise ValueError(f"no tolerance for dtype {exc.args[0]!r}") from None
    tol, source = max(candidates, key=lambda c: c[0])
    if out_tol > tol:
        tol, source = out_tol, f"output {case.out} tol={out_tol}"
    all_fp32 = case.act == case.weight == case.out == "fp32"
    budget = BAD_FRACTION_FP32 if all_fp32 else BAD_FRACTION
    return Tolerance(atol=tol, rtol=tol, max_bad_fraction=budget, source=source)


@dataclass(frozen=True)
class NumericsReport:
    """The outcome of :func:`compare`."""

    ok: bool
    max_abs_err: float  #: inf when actual has a NaN/Inf
    mean_abs_err: float  #: over finite elements
    bad_elements: int  #: includes the non-finite ones
    nonfinite: int  #: NaN/Inf elements of actual
    total: int
    allowed_bad: int
    worst_index: tuple[int, ...] | None  #: (row, col) of the worst violation, None if empty
    worst_actual: float
    worst_expected: float
    atol: float  #: effective: tolerance.atol * scale
    rtol: float
    scale: float
    tolerance: Tolerance

    def summary(self) -> str:
        """One line for failure messages and reports."""
        verdict = "ok" if self.ok else "MISMATCH"
        where = (
            f"worst at {self.worst_index}: got {self.worst_actual:.6g}, expected {self.worst_expected:.6g}"
            if self.worst_index is not None
            else "no elements"
        )
        return (
            f"{verdict}: {self.bad_elements}/{self.total} bad (allowed {self.allowed_bad}, "
            f"{self.nonfinite} non-finite), max|err|={self.max_abs_err:.4g}, "
            f"mean|err|={self.mean_abs_err:.4g}, atol={self.atol:.4g} "
            f"(={self.tolerance.atol:g}*rms {self.scale:.4g}), rtol={self.rtol:g}; {where}"
        )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major index of element ``flat``; torch.unravel_index would import sympy (seconds)."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def compare(
    actual: torch.Tensor,
    expected: torch.Tensor,
    policy: Tolerance,
    *,
    scale: float | None = None,
) -> NumericsReport:
    """Check ``actual`` against ``expected`` (same shape) under ``policy``.

    ``scale`` defaults to the RMS of ``expected`` (1 if that is 0); atol is multiplied by it.
    """
    if actual.shape != expected.shape:
        raise ValueError(f"shape mismatch: actual {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    act = actual.detach().to(device="cpu", dtype=torch.float64)
    exp = expected.detach().to(device="cpu", dtype=torch.float64)
    total = exp.numel()
    if scale is None:
        rms = float(exp.square().mean().sqrt()) if total else 0.0
        scale = rms if rms > 0 and math.isfinite(rms) else 1.0
    atol = policy.atol * scale
    allowed = policy.allowed_bad(total)
    if total == 0:
        return NumericsReport(
            True, 0.0, 0.0, 0, 0, 0, allowed, None, math.nan, math.nan, atol, policy.rtol, scale, policy
        )
    finite = torch.isfinite(act)
    err = torch.where(finite, (act - exp).abs(), torch.full_like(act, math.inf))
    limit = atol + policy.rtol * exp.abs()
    bad = err > limit
    nonfinite = int((~finite).sum())
    bad_count = int(bad.sum())
    # the worst element is the largest violation relative to its limit (NaN/Inf first)
    ratio = err / limit.clamp_min(torch.finfo(torch.float64).tiny)
    flat = int(torch.argmax(ratio.reshape(-1)))
    index = _unravel(flat, tuple(exp.shape))
    finite_err = err[finite]
    return NumericsReport(
        ok=nonfinite == 0 and bad_count <= allowed,
        max_abs_err=float(err.max()),
        mean_abs_err=float(finite_err.mean()) if finite_err.numel() else math.nan,
        bad_elements=bad_count,
        nonfinite=nonfinite,
        total=total,
        allowed_bad=allowed,
        worst_index=index,
        worst_actual=float(act.reshape(-1)[flat]),
        worst_expected=float(exp.reshape(-1)[flat]),
        atol=atol,
        rtol=policy.rtol,
        scale=scale,
        tolerance=policy,
    )
