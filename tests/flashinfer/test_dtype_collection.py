"""A dtype combination FlashInfer's launcher has no kernel of on an arch is refused when the
matrix loads (the backend's :meth:`dtypes_on`, no compiler): ``--collect-only`` fails on it with
the file, the place and the combinations that arch has, and ``--tile-update`` never records it
as a known failure."""

from __future__ import annotations

import pytest

from pytest_tileconform.flashinfer.configs import instantiated_dtypes

MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: [bf16, {act: nvfp4, weight: nvfp4, out: bf16}]
    tile: [128x64x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
  - arch: [sm100, sm120]
    dtype: fp32
    tile: [128x128x128]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""


@pytest.fixture
def matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("CI", raising=False)
    pytester.path.joinpath("m.yaml").write_text(MATRIX)
    return str(pytester.path / "m.yaml")


@pytest.mark.parametrize("args", [["--collect-only"], ["--tile-update", "--tile-device", "compile"]])
def test_a_dtype_without_kernels_is_a_usage_error(
    pytester: pytest.Pytester, matrix: str, args: list[str]
) -> None:
    result = pytester.runpytest("--tile-matrix", "m.yaml", "-p", "no:xdist", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "Traceback" not in err
    assert (
        f"{matrix}:5:19: dtype nvfp4-bf16 (act nvfp4, weight nvfp4, out bf16) on sm90: backend "
        "'flashinfer-cutlass-moe' instantiates no kernel of it there; on sm90 it has bf16, bf16xmxfp4-bf16"
    ) in err
    # fp32 is SM100's, not SM120's: refused once, for the arch that lacks it
    assert f"{matrix}:9:5: dtype fp32 (act fp32, weight fp32, out fp32) on sm120:" in err
    assert "on sm100:" not in err
    assert "expectations" not in (pytester.path / "m.yaml").read_text()  # nothing blessed


def test_every_combination_of_every_shipped_arch_is_admitted() -> None:
    """The launcher's combinations per arch, as the configuration checks admit them."""
    assert ("nvfp4", "nvfp4", "bf16") in instantiated_dtypes(120)
    assert ("bf16", "bf16", "bf16") not in instantiated_dtypes(120)
    assert ("fp8_e4m3", "int4", "bf16") in instantiated_dtypes(90)
    assert ("fp8_e4m3", "fp8_e4m3", "fp32") not in instantiated_dtypes(90)
    assert ("mxfp8", "mxfp8", "bf16") in instantiated_dtypes(103)
    assert instantiated_dtypes(89) == ()
