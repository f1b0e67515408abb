"""--tile-max-cases raises or lowers the bound on the cases one matrix file may expand to."""

from __future__ import annotations

from pathlib import Path

import pytest

SMOKE = Path(__file__).resolve().parents[2] / "matrices" / "smoke-sm90.yaml"


@pytest.fixture
def matrix(pytester: pytest.Pytester) -> Path:
    path = pytester.path / SMOKE.name
    path.write_text(SMOKE.read_text())
    return path


def test_a_lower_limit_refuses_the_matrix(pytester: pytest.Pytester, matrix: Path) -> None:
    result = pytester.runpytest("--tile-matrix", str(matrix), "-p", "no:xdist", "--tile-max-cases", "5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "expands to 6 cases, more than the limit of 5" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_the_limit_is_inclusive(pytester: pytest.Pytester, matrix: Path) -> None:
    result = pytester.runpytest(
        "--tile-matrix", str(matrix), "-p", "no:xdist", "--tile-max-cases", "6", "--collect-only", "-q"
    )
    assert result.ret == pytest.ExitCode.OK


def test_a_limit_below_one_is_a_usage_error(pytester: pytest.Pytester, matrix: Path) -> None:
    result = pytester.runpytest("--tile-matrix", str(matrix), "-p", "no:xdist", "--tile-max-cases", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--tile-max-cases 0: must be at least 1" in result.stderr.str()


def test_a_limit_no_host_can_hold_is_a_usage_error(pytester: pytest.Pytester, matrix: Path) -> None:
    """3,000,000,000 would let a matrix of 60,000 YAML nodes expand to more pytest items than
    any host holds."""
    args = ("--tile-matrix", str(matrix), "-p", "no:xdist", "--tile-max-cases", "3000000000")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--tile-max-cases 3000000000: must be at most 1,000,000" in result.stderr.str()
