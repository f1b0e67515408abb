"""A FlashInfer case built by hand, for the tests of the backend's inputs, reference and stages."""

from __future__ import annotations

from pathlib import Path

from pytest_tileconform.flashinfer.axes import MoeAxes, MoeCase
from pytest_tileconform.flashinfer.problem import Problem
from pytest_tileconform.matrix.cases import Case


def make_case(
    dtype: str = "bf16",
    rows: list[int] | None = None,
    n: int = 16,
    k: int = 32,
    fusion: str = "none",
    out: str | None = None,
    weight: str | None = None,
) -> MoeCase:
    out = out or dtype
    weight = weight or dtype
    return Case(
        matrix=Path("m.yaml"),
        backend="flashinfer-cutlass-moe",
        arch="sm90",
        act=dtype,
        weight=weight,
        out=out,
        dtype_label=dtype,
        tile=(128, 128, 64),
        axes=MoeAxes(
            problem=Problem(rows=tuple(rows or [3, 0, 5]), n=n, k=k),
            cluster=(1, 1, 1),
            swap_ab=False,
            fusion=fusion,
        ),
        expectation=None,
        suite=None,
    )
