"""The dense backend judged from a ``--tile-flashinfer`` release: a wheel-shaped zip of the installed
FlashInfer's own files, unpacked for every installed backend, gives the same families, tactics,
recipes and units as the installed package; a release without a family skips its cases as not in
that release, never a verdict (no network, no compile)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.dense_wheels import dense_wheel
from helpers.fake_backend import QUIET, output

from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO
from pytest_tileconform.flashinfer.releases import Release, installed_members, unpack_wheel
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL, find_sources
from pytest_tileconform.flashinfer_dense.axes import DenseAxes
from pytest_tileconform.flashinfer_dense.backend import DenseBackend
from pytest_tileconform.flashinfer_dense.generator import read_recipe
from pytest_tileconform.flashinfer_dense.offered import read_offered
from pytest_tileconform.flashinfer_dense.runners import runners
from pytest_tileconform.flashinfer_dense.unit import make_unit
from pytest_tileconform.matrix.cases import Case
from pytest_tileconform.verdict import NotJudgeable

MISSING = "mxfp8_gemm_cutlass_sm120"


def case(act: str, tile: tuple[int, int, int], swap: bool = False) -> Case[DenseAxes]:
    return Case(
        Path("m.yaml"), "dense", "sm120", act, act, "bf16", f"{act}-bf16", tile,
        DenseAxes(swap, (256, 256, 512)), None, None,
    )  # fmt: skip


def release(tmp_path: Path, **wheel: Any) -> Release:
    return unpack_wheel(dense_wheel(tmp_path, **wheel), tmp_path / "cache", members=installed_members())


def test_a_release_gives_what_the_installed_package_gives(tmp_path: Path) -> None:
    unpacked, installed = release(tmp_path), find_sources()
    sources = unpacked.sources()
    assert sources.version == installed.version == "0.7.4"
    ours, theirs = read_offered(sources), read_offered(installed)
    assert [f.module for f in ours.families] == [f.module for f in theirs.families]
    for mine, reference in zip(ours.families, theirs.families, strict=True):
        assert (mine.tactics, mine.instantiated, mine.majors) == (
            reference.tactics,
            reference.instantiated,
            reference.majors,
        )
        assert mine.runner.is_relative_to(unpacked.data_dir)
    recipe = read_recipe(sources, "gen_gemm_sm120_module_cutlass_mxfp8")
    assert recipe.templates and all(t.path.is_relative_to(unpacked.data_dir) for t in recipe.templates)
    theirs_recipe = read_recipe(installed, recipe.function)
    assert recipe.extra_flags == theirs_recipe.extra_flags
    assert [(t.path.name, t.shapes) for t in recipe.templates] == [
        (t.path.name, t.shapes) for t in theirs_recipe.templates
    ]
    for tactic in ours.family(MISSING).tactics:
        wanted = case("mxfp8", tactic.cta, tactic.swap_ab)
        assert make_unit(sources, ours, wanted).source == make_unit(installed, theirs, wanted).source
    for arch in ("sm100", "sm120"):
        found, untuned = runners(ours, arch, unpacked.package)
        expected, left = runners(theirs, arch, installed.root.parent)
        assert [(r.runner_class, r.custom_ops) for r in found] == [
            (r.runner_class, r.custom_ops) for r in expected
        ]
        assert [f.module for f in untuned] == [f.module for f in left]


def test_a_family_the_release_does_not_ship_is_not_judged(
    tmp_path: Path, backend_settings: Callable[..., Any]
) -> None:
    older = release(tmp_path, version="0.6.4", without=MISSING)
    backend = DenseBackend(backend_settings(device="virtual"), older.data_dir, lambda _m: None, older.ident)
    assert MISSING not in [f.module for f in backend.offered.families]
    with pytest.raises(NotJudgeable) as skipped:
        backend.judge(case("mxfp8", (128, 128, 128)))
    assert str(skipped.value).startswith(f"not in this release: FlashInfer 0.6.4 does not ship {MISSING}")
    assert "has no gen_gemm_sm120_module_cutlass_mxfp8" in str(skipped.value)
    # the family it ships is still read: a tile it does not offer is a verdict, without a build
    verdict = backend.judge(case("nvfp4", (512, 512, 512)))
    assert verdict.status == "not offered"
    assert not (tmp_path / "cache" / "build").exists()


MATRIX = """\
version: 1
backend: flashinfer-cutlass-dense
defaults:
  arch: sm120
  swap_ab: [false]
  mnk: [256x256x512]
suites:
  - name: mxfp8
    dtype: mxfp8-bf16
    tile: [128x128x128]
  - name: fp4
    dtype: nvfp4-bf16
    tile: [512x512x512]
"""


def test_the_plugin_plans_dense_cases_from_a_release(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``--tile-flashinfer WHEEL``: collected, then planned on the virtual device without a compile:
    the family the release lacks skipped as not in it, the one it ships read from it."""
    wheel = dense_wheel(tmp_path, version="0.6.4", without=MISSING)
    pytester.makefile(".yaml", gemm=MATRIX)
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    common = ["--tile-matrix", "gemm.yaml", "--tile-flashinfer", str(wheel), "--tile-cache-dir", str(cache)]
    common += ["--tile-device", "virtual:sm120"]
    collected = pytester.runpytest_subprocess(*common, "--collect-only", "-q", *QUIET)
    assert collected.ret == 0, output(collected)
    assert len([line for line in collected.outlines if "sm120-" in line]) == 2, output(collected)
    result = pytester.runpytest_subprocess(*common, "--tile-report", str(report), "-rs", *QUIET)
    cases = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    (mxfp8,) = [c for i, c in cases.items() if "mxfp8" in i]
    assert mxfp8["outcome"] == "skipped" and mxfp8["verdict"] is None, output(result)
    assert f"not in this release: FlashInfer 0.6.4 does not ship {MISSING}" in mxfp8["skip_reason"]
    (fp4,) = [c for i, c in cases.items() if "nvfp4" in i]
    assert fp4["verdict"]["status"] == "not offered", output(result)
    assert "flashinfer-python 0.6.4 (wheel sha256:" in json.dumps(fp4), output(result)


#: a MoE launcher from before SWAP_AB_ (FlashInfer < 0.5.3): the MoE harness cannot instantiate it
OLD_LAUNCHER = "#define {}({})\n".format(MACRO, ", ".join(p for p in HARNESS_MACRO_PARAMS if p != "SWAP_AB_"))
MOE_MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64]
    problems: {experts: 2, rows: 8, n: 64, k: 64}
"""


def test_a_release_the_moe_harness_cannot_instantiate_still_judges_dense_cases(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The MoE plugin's check of a ``--tile-flashinfer`` release (its launcher's interface) speaks
    for MoE cases only: a run of dense cases alone is judged from the release; with an MoE case
    beside them the run stops, naming why."""
    wheel = dense_wheel(tmp_path, texts={f"csrc/nv_internal/{LAUNCHER_INL}": OLD_LAUNCHER})
    pytester.makefile(".yaml", gemm=MATRIX.replace("tile: [128x128x128]", "tile: [512x512x512]"))
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    common = ["--tile-flashinfer", str(wheel), "--tile-cache-dir", str(cache), "--tile-device", "virtual"]
    dense = pytester.runpytest_subprocess(
        "--tile-matrix", "gemm.yaml", *common, "--tile-report", str(report), *QUIET
    )
    assert "cannot be judged by this harness" not in output(dense)
    statuses = [c["verdict"]["status"] for c in json.loads(report.read_text())["cases"]]
    assert statuses == ["not offered", "not offered"], output(dense)  # no compile: FlashInfer offers neither
    pytester.makefile(".yaml", moe=MOE_MATRIX)
    both = pytester.runpytest_subprocess(
        "--tile-matrix", "gemm.yaml", "--tile-matrix", "moe.yaml", *common, *QUIET
    )
    assert both.ret == pytest.ExitCode.USAGE_ERROR, output(both)
    assert "cannot be judged by this harness" in output(both)
    assert "takes 16 parameters without SWAP_AB_" in output(both)
