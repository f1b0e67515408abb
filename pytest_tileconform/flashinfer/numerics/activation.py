"""The activation fusion's expected D (SM100 ``EpilogueFusion::ACTIVATION``; docs/numerics.md,
"Activation fusion"): ClampedRelu2 of ``alpha * acc`` written in the activation type, for MXFP8
quantized per 32 along N with ue8m0 scales the epilogue writes beside D.

ClampedRelu2 (TensorRT-LLM's ``fused_activations.h``) is ``f(v) = (L * tanh(relu(v) / L))**2``
in fp32, and CUTLASS's ``Tanh`` is ``tanh.approx.f32``: D is not exact, so the check is an
interval. A correct kernel's fp32 value lies within a relative :data:`RELU2_REL_ERROR` of the
exact ``f``, and D is what that value rounds to (round to nearest, monotone): any output value
between the roundings of the interval's ends, one value unless a rounding boundary lies inside.
With MXFP8 D (``LinCombEltActBlockScaleFactor``, ``Sm100BlockScaleFactorRowStore``) a block's
scale is its fp32 amax times ``rcp.approx(448)`` (norm_constant 1) rounded up to a power of two
(``cvt.rp.satfinite.ue8m0``): one of at most two powers of two, checked against the kernel's;
given the kernel's scale ``s`` (its reciprocal is exact), D is ``RN_satfinite_e4m3(y / s)``.
"""

from __future__ import annotations

import math

import torch

from ...dtypes import dtype
from .tolerance import Expected

#: tanh.approx.f32's maximum relative error (PTX ISA: 2^-10.987, sm_75 and later)
TANH_REL_ERROR = 2.0**-10.987
#: ClampedRelu2 in fp32 against the exact f: the square doubles tanh's error; alpha * acc,
#: t * L, t * t and converting the interval's ends (through fp32) add a few 2^-24 (2^-20 covers them)
RELU2_REL_ERROR = 2 * TANH_REL_ERROR + 2.0**-20
#: amax * rcp.approx(448) against amax / 448: one more rounding of each
SCALE_REL_ERROR = RELU2_REL_ERROR + 2.0**-21
#: e4m3's largest finite value (satfinite clamps to it) and MX's scale block along N
E4M3_MAX = 448.0
SCALE_BLOCK = 32


def clamp_limit(k: int) -> float:
    """The limit L a problem of depth ``k`` is given: a power of two (``relu(v) / L`` and
    ``t * L`` are then exact) near sqrt(K), the typical |accumulator| of the generated inputs,
    so that D spans tanh's linear, bending and saturated ranges."""
    return 2.0 ** round(math.log2(math.sqrt(k)))


def clamped_relu2(values: torch.Tensor, limit: float) -> torch.Tensor:
    """``(L * tanh(relu(v) / L))**2`` in float64 (the exact f, to float64's precision)."""
    v = values.to(torch.float64)
    return (limit * torch.tanh(v.clamp(min=0) / limit)) ** 2


def _rounded(x: torch.Tensor, out: torch.dtype) -> torch.Tensor:
    return x.to(torch.float32).to(out).to(torch.float64)


def _interval(lo: torch.Tensor, hi: torch.Tensor, out: torch.dtype) -> Expected:
    """The output values from ``RN(lo)`` to ``RN(hi)`` as an Expected (midpoint and half width,
    both exact in float64)."""
    low, high = _rounded(lo, out), _rounded(hi, out)
    return Expected((low + high) / 2, (high - low) / 2, out)


def expected_activation(values: torch.Tensor, limit: float, d: str) -> Expected:
    """What a correct kernel writes for ``alpha * acc`` = ``values`` (float64, rows x N) with
    D of dtype ``d``. An MXFP8 D depends on the scales the kernel chose: the Expected returned
    then holds the exact f and its error, in :data:`E4M3_MAX` units never checked directly
    (``scaled``); :func:`with_scales` turns it into D's check given the kernel's scales."""
    f = clamped_relu2(values, limit)
    err = f * RELU2_REL_ERROR
    if dtype(d).mx:
        return Expected(f, err, torch.float8_e4m3fn, scaled=True)
    return _interval(f - err, f + err, getattr(torch, dtype(d).storage))


def _ue8m0_ceil(x: torch.Tensor) -> torch.Tensor:
    """The ue8m0 byte of ``x`` (> = 0) rounded up to a power of two, saturating (cvt.rp.satfinite):
    0 for x = 0 and below 2^-127, 254 at most."""
    mantissa, exponent = torch.frexp(x)  # x = m * 2**e, m in [0.5, 1)
    log2_ceil = torch.where(mantissa == 0.5, exponent - 1, exponent)
    return torch.where(x > 0, (log2_ceil + 127).clamp(0, 254), 0).to(torch.int32)


def scale_bytes(f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The lowest and highest ue8m0 byte a correct kernel can write for each block of 32 along
    N of the exact f (rows x N/32, int32): its amax / 448 within :data:`SCALE_REL_ERROR`,
    rounded up."""
    rows, n = f.shape
    amax = f.reshape(rows, n // SCALE_BLOCK, SCALE_BLOCK).amax(dim=-1)
    low = _ue8m0_ceil(amax * (1 - SCALE_REL_ERROR) / E4M3_MAX)
    high = _ue8m0_ceil(amax * (1 + SCALE_REL_ERROR) / E4M3_MAX)
    return low, high


def with_scales(expected: Expected, scales: torch.Tensor) -> Expected:
    """An MXFP8 D's check (in e4m3) given the kernel's scales (rows x N/32 uint8, linear): D
    within the roundings of ``(f -/+ err) / s``, satfinite; a block whose scale no correct
    kernel writes expects inf, so each of its elements fails."""
    if not expected.scaled:
        raise ValueError("with_scales takes the Expected of an MXFP8 activation D")
    f, err = expected.value, expected.allowed
    low, high = scale_bytes(f)
    given = scales.to(device=f.device, dtype=torch.int32)
    good = (given >= low) & (given <= high)
    # the epilogue's reciprocal of a ue8m0 scale is exact (an integer subtraction): 2**(127 - byte)
    inverse = torch.ldexp(torch.ones_like(given, dtype=torch.float64), 127 - given.clamp(max=254))
    inverse = inverse.repeat_interleave(SCALE_BLOCK, dim=1)
    lo = ((f - err) * inverse).clamp(max=E4M3_MAX)
    hi = ((f + err) * inverse).clamp(max=E4M3_MAX)
    d = _interval(lo, hi, torch.float8_e4m3fn)
    bad = ~good.repeat_interleave(SCALE_BLOCK, dim=1)
    value = torch.where(bad, math.inf, d.value)
    bound = torch.where(bad, 0.0, d.allowed)
    return Expected(value, bound, torch.float8_e4m3fn)
