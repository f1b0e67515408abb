"""The numerics policy's pieces: ulp, finalize's reduction bound, compare and its report."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from pytest_tileconform.flashinfer.numerics.tolerance import (
    POISON_BYTE,
    Expected,
    compare,
    finalize_bound,
    poison_value,
    quantum,
    ulp,
)

BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


def test_ulp_of_each_output_type() -> None:
    x = torch.tensor([1.0, 1.5, 2.0, -3.0, 0.0, 2.0**-130], dtype=torch.float64)
    assert ulp(x, BF16).tolist() == [2.0**-7, 2.0**-7, 2.0**-6, 2.0**-6, 2.0**-133, 2.0**-133]
    assert ulp(x, FP16).tolist()[:5] == [2.0**-10, 2.0**-10, 2.0**-9, 2.0**-9, 2.0**-24]
    assert ulp(x, FP32).tolist()[:4] == [2.0**-23, 2.0**-23, 2.0**-22, 2.0**-22]
    # the spacing torch's own nextafter sees
    for value, dtype in itertools.product((1.0, 3.0, 1000.0), (BF16, FP16, FP32)):
        t = torch.tensor([value], dtype=dtype)
        step = float(torch.nextafter(t, torch.tensor([math.inf], dtype=dtype)) - t)
        assert ulp(t.double(), dtype).item() == step


def orders(values: list[float], dtype: torch.dtype) -> list[float]:
    """D after adding ``values`` into 0 in every order, each add rounded to ``dtype``."""
    results = []
    for order in itertools.permutations(values):
        d = torch.zeros((), dtype=dtype)
        for v in order:
            d = (d.double() + v).to(dtype)
        results.append(float(d))
    return results


@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_finalize_bound_covers_every_order(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    for m in (1, 2, 3, 4, 5):
        for _ in range(20):
            v = (torch.randn(m, generator=gen, dtype=torch.float64) * 3).to(dtype).double()
            exact = float(v.sum())
            a, mx = v.abs().sum().reshape(1, 1), v.abs().max().reshape(1, 1)
            bound = float(finalize_bound(a, mx, torch.tensor([m]), dtype))
            worst = max(abs(r - exact) for r in orders(v.tolist(), dtype))
            assert worst <= bound, (v.tolist(), worst, bound)
            if m == 1:
                assert bound == 0.0


def test_finalize_bound_by_hand() -> None:
    # two bf16 contributions of 1.0 and 1.0078125 (1 + 2**-7): their sum 2.0078125 rounds in
    # the binade [2, 4), ulp 2**-6: half of it is the bound
    a = torch.tensor([[2.0078125]], dtype=torch.float64)
    mx = torch.tensor([[1.0078125]], dtype=torch.float64)
    assert float(finalize_bound(a, mx, torch.tensor([2]), BF16)) == 2.0**-7
    assert float(finalize_bound(a, mx, torch.tensor([1]), BF16)) == 0.0
    # a row that receives nothing has no error
    zero = torch.zeros(1, 1, dtype=torch.float64)
    assert float(finalize_bound(zero, zero, torch.tensor([0]), BF16)) == 0.0


def exact_expected(values: list[list[float]], dtype: torch.dtype = BF16) -> Expected:
    return Expected(torch.tensor(values, dtype=torch.float64), None, dtype)


def test_compare_exact_passes_only_the_value() -> None:
    expected = exact_expected([[1.0, 2.0, -3.0], [0.0, 0.5, 96.0]])
    report = compare(expected.value.to(BF16), expected)
    assert report.ok and report.exact and report.over_bound == 0 and report.max_ulp_err == 0
    assert report.summary().startswith("ok: 0/6 over the bound (0 non-finite, 0 unwritten)")
    assert "max 0 ulp of bfloat16 (exact: correctly rounded)" in report.summary()
    off = expected.value.to(BF16).clone()
    off[1, 2] = torch.nextafter(off[1, 2], torch.tensor(math.inf, dtype=BF16))  # 96 -> 96.5
    report = compare(off, expected)
    assert not report.ok and report.over_bound == 1 and report.max_ulp_err == 1.0
    assert report.worst_index == (1, 2) and report.worst_actual == 96.5 and report.worst_expected == 96.0
    assert report.summary().startswith("MISMATCH: 1/6 over the bound")


def test_an_exact_pass_is_found_bit_for_bit_and_zeros_of_either_sign_still_pass() -> None:
    """The one-pass check of an exact case: the bits of D against the expected value's. A D that
    differs only in the sign of a zero is not bit-identical, takes the full comparison and passes
    there; the derived bits are made once and kept for the problem's other cases."""
    expected = exact_expected([[1.0, 0.0, -3.0]])
    report = compare(expected.value.to(BF16), expected)
    assert (
        report.ok and report.worst_index is None and "D equals the reference bit for bit" in report.summary()
    )
    bits = expected.bits
    signed = expected.value.to(BF16).clone()
    signed[0, 1] = -0.0
    report = compare(signed, expected)
    assert report.ok and report.worst_index is not None and report.max_ulp_err == 0
    assert expected.bits is bits


def test_compare_checks_finalize_against_its_bound() -> None:
    value = torch.tensor([[2.0, 1.0]], dtype=torch.float64)
    bound = torch.tensor([[2.0**-6, 0.0]], dtype=torch.float64)
    expected = Expected(value, bound, BF16, magnitude=torch.tensor([[4.0, 1.0]], dtype=torch.float64))
    within = torch.tensor([[2.0 + 2.0**-6, 1.0]], dtype=BF16)
    report = compare(within, expected)
    assert report.ok and not report.exact
    assert report.max_ulp_err == 0.5 and report.max_bound_ulp == 0.5  # ulp of 4.0 in bf16: 2**-5
    beyond = torch.tensor([[2.0 + 2.0**-5, 1.0]], dtype=BF16)
    assert not compare(beyond, expected).ok
    exact_column = torch.tensor([[2.0, 1.0078125]], dtype=BF16)  # bound 0 where one row adds
    report = compare(exact_column, expected)
    assert not report.ok and report.worst_index == (0, 1)


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_compare_counts_the_poison_as_unwritten_and_nonfinite(dtype: torch.dtype) -> None:
    expected = exact_expected([[1.0, 2.0], [3.0, 4.0]], dtype)
    d = expected.value.to(dtype)
    d[1] = poison_value(dtype)
    assert poison_value(dtype).view(torch.uint8).tolist() == [POISON_BYTE] * d.element_size()
    report = compare(d, expected)
    assert not report.ok and report.unwritten == 2 and report.nonfinite == 2 and report.over_bound == 2
    assert report.max_ulp_err == math.inf and report.worst_index == (1, 0)
    nan = expected.value.to(dtype)
    nan[0, 0] = math.nan  # a NaN the kernel wrote is not the poison
    report = compare(nan, expected)
    assert report.nonfinite == 1 and report.unwritten == 0


def test_compare_wants_d_as_read() -> None:
    expected = exact_expected([[1.0]])
    with pytest.raises(ValueError, match="shape"):
        compare(torch.zeros(2, 1, dtype=BF16), expected)
    with pytest.raises(TypeError, match="compare D as read"):
        compare(torch.zeros(1, 1, dtype=torch.float32), expected)
    empty = compare(
        torch.zeros(0, 4, dtype=BF16), Expected(torch.zeros(0, 4, dtype=torch.float64), None, BF16)
    )
    assert empty.ok and empty.total == 0 and "no elements" in empty.summary()


def test_quantum() -> None:
    x = torch.tensor([1.0, 1.5, -0.375, 3 * 2.0**-20, 0.0, 6.0], dtype=torch.float64)
    assert quantum(x).tolist() == [1.0, 0.5, 0.125, 2.0**-20, math.inf, 2.0]


@pytest.mark.parametrize("dtype", [BF16, FP16, FP32])
def test_contributions_on_a_coarse_grid_add_exactly_in_any_order(dtype: torch.dtype) -> None:
    """Where sum |v| < 2**p * (the contributions' common power of two), no add rounds: the
    bound is 0 and every order gives the exact sum."""
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        v = torch.randint(-40, 41, (5,), generator=gen).double() / 8  # multiples of 1/8, |v| <= 5
        a, mx = v.abs().sum().reshape(1, 1), v.abs().max().reshape(1, 1)
        step = quantum(v).min().reshape(1, 1)
        bound = float(finalize_bound(a, mx, torch.tensor([5]), dtype, step))
        fits = float(a) < float(step) * 2.0 ** {BF16: 8, FP16: 11, FP32: 24}[dtype]
        assert (bound == 0.0) == fits or float(a) == 0
        if bound == 0.0:
            assert set(orders(v.tolist(), dtype)) == {float(v.sum())}
        else:
            assert max(abs(r - float(v.sum())) for r in orders(v.tolist(), dtype)) <= bound
