"""Numerics policy: how far a correct kernel's D may be from the reference, element by element.

The inputs are exact (:mod:`.reference`), so the only freedom a correct kernel has is the one
docs/numerics.md derives:

* without fusion, and with ``finalize`` where a token receives one row, none: the epilogue's
  fp32 math is exact and its conversion to the output type rounds to nearest, so D must hold
  exactly the value :func:`.reference.expected_output` computes (a kernel that converted with
  another rounding would be off by one unit in the last place and fail, on purpose);
* with ``finalize`` where a token receives ``m > 1`` rows, the ``m - 1`` adds into D (red.add in
  the output type) round in an order the kernel does not fix: :func:`finalize_bound`;
* with the activation fusion, ClampedRelu2's approximate tanh: an interval of output values
  (:mod:`.activation`).

There is no budget of bad elements and no tolerance relative to the output's size: one element
off by one unit in the last place fails a case whose result is exact. Errors are reported in
units in the last place (ulp) of the output type at the expected value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

#: The byte the harness fills D with before the kernel runs (``kPoisonByte`` in harness_verdict.h):
#: all-ones bytes are a NaN in bf16, fp16 and fp32, so an element the kernel never wrote fails,
#: and :func:`compare` counts it as unwritten.
POISON_BYTE = 0xFF


@dataclass(frozen=True, eq=False)
class Expected:
    """What a correct kernel's D is, on the device the reference ran on."""

    #: float64: without fusion the output-type value a correct kernel writes; with finalize the
    #: exact sum of a token's contributions, each rounded to the output type as the kernel does
    value: torch.Tensor
    #: float64 |D - value| a correct kernel may reach (finalize's reduction order); None: 0
    bound: torch.Tensor | None
    out_dtype: torch.dtype
    #: float64 magnitude whose ulp errors are counted in: finalize's sum of |contributions|,
    #: the scale its adds round at (a token whose rows cancel has a tiny D but not tiny
    #: rounding); None: the value itself
    magnitude: torch.Tensor | None = None
    #: an MXFP8 activation D before the kernel's scales are known: :attr:`value` is the exact
    #: activation, not D (:func:`.activation.with_scales` makes D's check of it)
    scaled: bool = False

    # What every check of the cases of one problem needs (they share their expected D): made at
    # the first check and kept (functools.cached_property stores into the instance's __dict__).
    @cached_property
    def exact(self) -> bool:
        """Whether D must equal :attr:`value` everywhere."""
        return self.bound is None or not bool((self.bound > 0).any())

    @cached_property
    def bits(self) -> torch.Tensor:
        """:attr:`value` in the output dtype: what an exact D must equal bit for bit."""
        return self.value.to(self.out_dtype)

    @cached_property
    def unit(self) -> torch.Tensor:
        """The ulp that errors are counted in."""
        return ulp(self.value if self.magnitude is None else self.magnitude, self.out_dtype)

    @cached_property
    def allowed(self) -> torch.Tensor:
        """:attr:`bound`, zeros where there is none."""
        return self.bound if self.bound is not None else torch.zeros_like(self.value)

    @cached_property
    def allowed_ulp(self) -> torch.Tensor:
        """:attr:`allowed` in ulp."""
        return self.allowed / self.unit

    @property
    def nbytes(self) -> int:
        # the fields and what was made from them so far (``allowed`` may be ``bound`` itself)
        kept = {id(t): t for t in vars(self).values() if isinstance(t, torch.Tensor)}
        return sum(t.numel() * t.element_size() for t in kept.values())


def _precision(out_dtype: torch.dtype) -> tuple[int, int]:
    """``(p, emin)``: significand bits (the implicit one included) and the smallest normal
    exponent of a floating-point output type."""
    info = torch.finfo(out_dtype)
    return round(1 - math.log2(info.eps)), round(math.log2(info.tiny))


def ulp(x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``out_dtype``'s values in the binade of ``|x|`` (float64; at 0 and below
    the normal range, the subnormal spacing)."""
    p, emin = _precision(out_dtype)
    _, exponent = torch.frexp(x)  # |x| = m * 2**exponent, m in [0.5, 1)
    binade = torch.where(x == 0, emin, torch.clamp(exponent - 1, min=emin))
    return torch.ldexp(torch.ones_like(x, dtype=torch.float64), binade - p + 1)


def quantum(x: torch.Tensor) -> torch.Tensor:
    """The largest power of two that divides each element of ``x`` (float64; inf at 0)."""
    mantissa, exponent = torch.frexp(x)  # x = mantissa * 2**exponent, |mantissa| in [0.5, 1)
    whole = torch.ldexp(mantissa, torch.full_like(exponent, 53)).to(torch.int64)  # exact
    lowest = whole & -whole  # the lowest set bit
    return torch.where(x == 0, math.inf, torch.ldexp(lowest.to(torch.float64), exponent - 53))


def finalize_bound(
    abs_sum: torch.Tensor,
    abs_max: torch.Tensor,
    fan_in: torch.Tensor,
    out_dtype: torch.dtype,
    step: torch.Tensor | None = None,
) -> torch.Tensor:
    """The most any order of finalize's reduction can move D from the exact sum of its rounded
    contributions ``v_1 .. v_m`` (docs/numerics.md).

    D starts at 0 and receives the ``v`` one at a time, each add rounded to nearest in the output
    type: the first is exact, the ``j``-th (``j >= 2``) errs by at most half an ulp of its
    result, whose magnitude is at most ``P_j + E_(j-1)`` with ``P_j = min(sum |v|, j * max |v|)``
    (no ``j`` of the ``v`` add up to more) and ``E_(j-1)`` the bound so far. ``abs_sum`` and
    ``abs_max`` are ``sum |v|`` and ``max |v|`` per element (float64, ``out_rows x N``),
    ``fan_in`` the ``m`` of each output row.

    ``step``, where given, is the smallest :func:`quantum` of an element's contributions: every
    partial sum is a multiple of it, so where ``sum |v| < 2**p * step`` (p the output type's
    significand bits) every partial sum is representable, no add rounds and the bound is 0
    (with these inputs, fp32 outputs: their contributions have some 20 bits).
    """
    bound = torch.zeros_like(abs_sum)
    if fan_in.numel() == 0:
        return bound
    m = fan_in.to(abs_sum.device).unsqueeze(1)
    for j in range(2, int(fan_in.max()) + 1):
        partial = torch.minimum(abs_sum, j * abs_max) + bound
        half = torch.where(partial > 0, ulp(partial, out_dtype) / 2, 0.0)
        bound = torch.where(m >= j, bound + half, bound)
    if step is not None:
        p, emin = _precision(out_dtype)
        exact = (abs_sum < step * 2.0**p) & (step >= 2.0 ** (emin - p + 1))
        bound = torch.where(exact, 0.0, bound)
    return bound


def poison_value(out_dtype: torch.dtype) -> torch.Tensor:
    """One element of ``out_dtype`` whose bytes are all :data:`POISON_BYTE` (CPU)."""
    size = torch.empty((), dtype=out_dtype).element_size()
    return torch.full((size,), POISON_BYTE, dtype=torch.uint8).view(out_dtype)


def _count_unwritten(actual: torch.Tensor, out_dtype: torch.dtype) -> int:
    """Elements of D (as read, in the output dtype) that still hold the poison pattern: NaN
    never equals itself, so the bits are compared."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
    poison = poison_value(out_dtype).view(ints).to(actual.device)
    return int((actual.view(ints) == poison).sum())


@dataclass(frozen=True)
class NumericsReport:
    """The outcome of :func:`compare`; errors in ulp of the output type at the expected value
    (with finalize, at the sum of the magnitudes of a token's contributions)."""

    ok: bool
    total: int
    over_bound: int  #: elements farther from the expected value than allowed (non-finite included)
    nonfinite: int  #: NaN/Inf elements of D
    unwritten: int  #: elements that still hold the poison pattern D was filled with
    exact: bool  #: D had to equal the expected value everywhere
    max_ulp_err: float  #: inf when D has a NaN/Inf
    max_bound_ulp: float  #: the loosest element's bound (0 when exact)
    max_abs_err: float
    #: (row, col) farthest beyond its bound; None if empty or D equals the reference bit for bit
    worst_index: tuple[int, ...] | None
    worst_actual: float
    worst_expected: float
    worst_bound_ulp: float
    out: str  #: the output type, as torch names it

    def summary(self) -> str:
        """One line for failure messages and reports."""
        verdict = "ok" if self.ok else "MISMATCH"
        rule = "exact: correctly rounded" if self.exact else f"bound: <= {self.max_bound_ulp:.3g} ulp"
        if self.worst_index is not None:
            where = (
                f"worst at {self.worst_index}: got {self.worst_actual:.9g}, expected "
                f"{self.worst_expected:.9g} (bound {self.worst_bound_ulp:.3g} ulp)"
            )
        else:
            where = "D equals the reference bit for bit" if self.total else "no elements"
        return (
            f"{verdict}: {self.over_bound}/{self.total} over the bound ({self.nonfinite} "
            f"non-finite, {self.unwritten} unwritten), max {self.max_ulp_err:.4g} ulp of "
            f"{self.out} ({rule}), max|err|={self.max_abs_err:.4g}; {where}"
        )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major index of element ``flat``; torch.unravel_index would import sympy (seconds)."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def _identical(actual: torch.Tensor, expected: Expected) -> bool:
    """Whether D holds exactly the bits of the expected value (an exact case's pass, found in one
    pass over D; anything else takes the full comparison)."""
    bits = expected.bits
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[bits.element_size()]
    return bool(torch.equal(actual.to(bits.device).view(ints), bits.view(ints)))


def compare(actual: torch.Tensor, expected: Expected) -> NumericsReport:
    """Check D (``actual``, in the output dtype as :func:`.runfiles.read_output` returns it)
    against ``expected``, on the device ``expected`` is on."""
    if actual.shape != expected.value.shape:
        raise ValueError(
            f"shape mismatch: actual {tuple(actual.shape)}, expected {tuple(expected.value.shape)}"
        )
    if expected.scaled:
        raise ValueError("an MXFP8 D is checked against the kernel's scales: activation.with_scales first")
    if actual.dtype != expected.out_dtype:
        raise TypeError(f"D is {actual.dtype}, the output type is {expected.out_dtype}: compare D as read")
    out = str(expected.out_dtype).removeprefix("torch.")
    total = expected.value.numel()
    if total == 0:
        return NumericsReport(
            True, 0, 0, 0, 0, expected.exact, 0.0, 0.0, 0.0, None, math.nan, math.nan, 0.0, out
        )
    if expected.exact and _identical(actual, expected):
        return NumericsReport(True, total, 0, 0, 0, True, 0.0, 0.0, 0.0, None, math.nan, math.nan, 0.0, out)
    unwritten = _count_unwritten(actual, expected.out_dtype)
    exp = expected.value
    act = actual.detach().to(device=exp.device, dtype=torch.float64)
    finite = torch.isfinite(act)
    err = (act - exp).abs_().nan_to_num_(nan=math.inf)
    bound = expected.allowed
    err_ulp = err / expected.unit
    bound_ulp = expected.allowed_ulp
    over_count = int((err > bound).sum())
    flat = int(torch.argmax((err_ulp - bound_ulp).reshape(-1)))
    nonfinite = total - int(finite.sum())
    return NumericsReport(
        ok=over_count == 0,
        total=total,
        over_bound=over_count,
        nonfinite=nonfinite,
        unwritten=unwritten,
        exact=expected.exact,
        max_ulp_err=math.inf if nonfinite else float(err_ulp.max()),
        max_bound_ulp=float(bound_ulp.max()),
        max_abs_err=float(err.max()),
        worst_index=_unravel(flat, tuple(exp.shape)),
        worst_actual=float(act.reshape(-1)[flat]),
        worst_expected=float(exp.reshape(-1)[flat]),
        worst_bound_ulp=float(bound_ulp.reshape(-1)[flat]),
        out=out,
    )
