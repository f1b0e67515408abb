"""tileconform gen-matrix: the matrix of what FlashInfer's generator instantiates."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers.fake_backend import TEST_KINDS
from helpers.paths import REPO

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.axes import moe_cases
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.configs import SM120_INPUTS, SM120_MIXED_TILES, SM120_TILES
from pytest_tileconform.matrix.load import load_matrix

pytestmark = pytest.mark.usefixtures("generator_sources")


def _generate(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "gen.yaml"
    assert main(["gen-matrix", *args, "-o", str(out)]) == 0
    return out


def _coords(path: Path) -> set[tuple[object, ...]]:
    return {
        (c.arch, c.act, c.weight, c.out, c.tile, c.axes.cluster, c.axes.swap_ab, c.axes.fusion)
        for c in moe_cases(load_matrix(path, TEST_KINDS).cases)
    }


def test_sm90_is_the_shipped_sm90_space(tmp_path: Path) -> None:
    """All 1,300 SM90 kernels: matrices/sm90.yaml (written by hand from the generator, each
    configuration judged over several problems, PDL on and off) holds the 360 uniform ones and
    sm90-mixed-flashinfer.yaml the 940 mixed-input ones."""
    generated = load_matrix(_generate(tmp_path, "--arch", "sm90"), TEST_KINDS)
    assert len(generated.cases) == 1300
    assert generated.model.expectations is None
    coords = _coords(tmp_path / "gen.yaml")
    uniform = {c for c in coords if c[1] == c[2]}
    assert len(uniform) == 360
    assert _coords(REPO / "matrices" / "sm90.yaml") == uniform
    mixed = load_matrix(REPO / "matrices" / "sm90-mixed-flashinfer.yaml", TEST_KINDS).cases
    assert {c.id for c in mixed} == {c.id for c in generated.cases if c.act != c.weight}


def test_sm120_is_what_codegen_supports(tmp_path: Path) -> None:
    coords = _coords(_generate(tmp_path, "--arch", "sm120"))
    want = set()
    for (act, weight), out, swap, fusion in itertools.product(
        SM120_INPUTS, ("bf16", "fp16"), (False, True), ("none", "finalize")
    ):
        tiles = SM120_TILES if act == "nvfp4" else SM120_MIXED_TILES
        want |= {("sm120", act, weight, out, t, (1, 1, 1), swap, fusion) for t in tiles}
    assert coords == want
    assert len(coords) == 88
    shipped = {c.id for c in load_matrix(REPO / "matrices" / "sm120.yaml", TEST_KINDS).cases}
    assert shipped <= {c.id for c in load_matrix(tmp_path / "gen.yaml", TEST_KINDS).cases}


def test_sm121_runs_the_sm120_kernel_set(tmp_path: Path) -> None:
    sm121 = {c[1:] for c in _coords(_generate(tmp_path, "--arch", "sm121"))}
    sm120 = {c[1:] for c in _coords(_generate(tmp_path, "--arch", "sm120"))}
    assert sm121 == sm120


def test_dtype_filter(tmp_path: Path) -> None:
    coords = _coords(_generate(tmp_path, "--arch", "sm120", "--dtype", "nvfp4-bf16"))
    assert len(coords) == 32 and {c[1:4] for c in coords} == {("nvfp4", "nvfp4", "bf16")}
    coords = _coords(_generate(tmp_path, "--arch", "sm90", "--dtype", "fp8_e4m3", "--dtype", "fp32"))
    assert {c[3] for c in coords if c[1] == "fp8_e4m3"} == {"bf16", "fp16"}
    assert {c[1] for c in coords} == {"fp8_e4m3", "fp32"}


def test_sm100_is_the_generators_space(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every SM100 instantiation FlashInfer emits, the 36 activation-fusion ones included (1,476);
    a dynamic-CGA kernel once per runtime cluster the heuristic gives it, a 2SM one only the
    clusters of even M."""
    cases = moe_cases(load_matrix(_generate(tmp_path, "--arch", "sm100"), TEST_KINDS).cases)
    kernels = {kernel_config(c) for c in cases}
    assert len(kernels) == 1476
    assert len({k for k in kernels if k.fusion == "activation"}) == 36
    assert {c.dtype_label for c in cases if c.axes.fusion == "activation"} == {
        "bf16",
        "mxfp8-fp16",
        "mxfp8-bf16",
    }
    assert {c.axes.cluster for c in cases} == {(1, 1, 1), (2, 1, 1)}
    assert {c.dtype_label for c in cases} >= {"bf16", "nvfp4-bf16", "mxfp8xmxfp4-fp16", "mxfp8-bf16"}
    assert {c.axes.epilogue for c in cases} == {None, "nosmem"}
    dynamic = [c for c in cases if c.axes.dynamic_cluster is not None]
    assert {c.axes.dynamic_cluster for c in dynamic if c.axes.cluster == (2, 1, 1)} == {(4, 1, 1), (4, 2, 1)}
    assert {c.axes.dynamic_cluster for c in dynamic if c.axes.cluster == (1, 1, 1)} == {
        (1, 1, 1),
        (4, 1, 1),
        (4, 2, 1),
    }
    assert len(cases) == len(kernels) + len(dynamic) - len({kernel_config(c) for c in dynamic})
    assert len(cases) == 2631 and len({c.id for c in cases}) == len(cases)
    assert "not built" not in capsys.readouterr().err


def test_sm103_builds_its_own_kernels_and_sm100s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """FlashInfer's sm103 module: SM103's own NVFP4 kernels, and SM100's whole set compiled for
    sm_103a (``kernel_arch: sm100``, ids ``-sm100kernel``), told apart where their shapes meet."""
    path = _generate(tmp_path, "--arch", "sm103")
    cases = moe_cases(load_matrix(path, TEST_KINDS).cases)
    own = [c for c in cases if c.axes.kernel_arch is None]
    assert len({kernel_config(c) for c in own}) == 96
    assert {c.dtype_label for c in own} == {"nvfp4-bf16", "nvfp4-fp16"}
    assert {c.tile for c in own} == {(128, 128, 256), (128, 256, 256)}
    sm100 = [c for c in cases if c.axes.kernel_arch == "sm100"]
    assert len({kernel_config(c) for c in sm100}) == 1476 and all(
        c.id.count("-sm100kernel") == 1 for c in sm100
    )
    assert len({c.id for c in cases}) == len(cases) == 168 + 2631
    assert {kernel_config(c).tag for c in sm100} == {100} and {c.arch for c in cases} == {"sm103"}
    assert "kernel_arch: sm100" in path.read_text()
    assert "1572 configuration(s) of FlashInfer 0.7.4 for sm103" in capsys.readouterr().err


def test_stdout_and_messages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen-matrix", "--arch", "sm120", "--dtype", "mxfp8"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("# FlashInfer ")
    assert "version: 1" in captured.out and "\nexpectations:" not in captured.out
    assert "24 configuration(s)" in captured.err
    assert "written by `tileconform gen-matrix --arch sm120 --dtype mxfp8`" in captured.out


def test_from_flashinfer_is_still_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    """FlashInfer's generator is the only source: the flag older command lines give changes nothing."""
    assert main(["gen-matrix", "--arch", "sm120", "--dtype", "mxfp8"]) == 0
    without = capsys.readouterr().out
    assert main(["gen-matrix", "--from-flashinfer", "--arch", "SM120", "--dtype", "mxfp8"]) == 0
    assert capsys.readouterr().out == without


def test_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen-matrix", "--arch", "sm120", "--dtype", "bf16"]) == 2
    captured = capsys.readouterr()
    assert "--dtype bf16: not instantiated" in captured.err and captured.out == ""


@pytest.mark.parametrize("argv", [["--arch", "sm80"], []])
def test_arch_is_checked_by_the_parser(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["gen-matrix", *argv])
    assert exit_info.value.code == 2
    assert "--arch" in capsys.readouterr().err


def test_sources_without_generator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gen-matrix", "--arch", "sm90", "--flashinfer-sources", str(tmp_path)]) == 3
    assert "incomplete" in capsys.readouterr().err
