"""The FlashInfer backend's options are checked when pytest starts, before any case is built."""

from __future__ import annotations

import pytest
from helpers.paths import SMOKE


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("virtual:sm77", "no built-in profile 'sm77'; known: sm90"),
        ("gpu", "knows auto, hardware, virtual, compile and virtual:<arch>"),
        ("hardware:sm90", "knows auto, hardware, virtual, compile and virtual:<arch>"),
    ],
)
def test_an_unknown_device_is_a_usage_error(pytester: pytest.Pytester, device: str, message: str) -> None:
    result = pytester.runpytest("--tile-matrix", str(SMOKE), "--tile-device", device, "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--tile-device '{device}': " in result.stderr.str()
    assert message in result.stderr.str()


def test_a_known_virtual_arch_is_accepted(pytester: pytest.Pytester) -> None:
    matrix = pytester.path / SMOKE.name
    matrix.write_text(SMOKE.read_text())
    result = pytester.runpytest(
        "--tile-matrix", str(matrix), "--tile-device", "virtual:sm120", "-p", "no:xdist", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*6 tests collected*"])


def test_the_virtual_device_marks_its_cases_unrun_at_collection(pytester: pytest.Pytester) -> None:
    """The backend knows before judging that a virtual device stops at launch
    (``FlashInferBackend.judged_through``), so ``-m`` can leave those cases out unbuilt."""
    matrix = pytester.path / SMOKE.name
    matrix.write_text(SMOKE.read_text())
    args = ("--tile-matrix", str(matrix), "-p", "no:xdist", "--collect-only", "-q")
    virtual = pytester.runpytest(*args, "--tile-device", "virtual", "-m", "not tileconform_unrun")
    virtual.stdout.fnmatch_lines(["*no tests collected (6 deselected)*"])
    selected = pytester.runpytest(*args, "--tile-device", "virtual", "-m", "tileconform_unrun")
    selected.stdout.fnmatch_lines(["*6 tests collected*"])
