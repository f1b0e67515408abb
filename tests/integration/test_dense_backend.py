"""The dense backend through pytest as users run it: its own entry point and axes, no edit of the
core. The shipped SM120 matrices name every tactic FlashInfer's runner offers for ``mm_mxfp8``, per
output type, and for ``mm_fp4`` (NVFP4), per output type; one case is compiled as FlashInfer's JIT
compiles it (about 90 s and 6.6 GB here, cached in the suite's build cache) and judged on the
virtual SM120 through launch, its tactic id, shared memory and the device's limit recorded in the
results file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.paths import REPO

from pytest_tileconform.dtypes import shape_label
from pytest_tileconform.flashinfer.sources import find_sources
from pytest_tileconform.flashinfer_dense.offered import read_offered

MATRIX = "gemm-sm120.yaml"
FP4_MATRIX = "gemm-sm120-fp4.yaml"
#: tactic 4 of mxfp8_gemm_cutlass_sm120 (CTA 128x128x128, no swap_ab), bf16 output
CASE = "sm120-mxfp8-bf16-128x128x128-m256n256k512"


@pytest.fixture
def matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CI", raising=False)  # as a user's desk run: --tile-update may write
    return Path(shutil.copy(REPO / "matrices" / MATRIX, pytester.path / MATRIX))


def test_the_shipped_matrix_names_every_tactic_flashinfer_offers(
    pytester: pytest.Pytester, matrix: Path
) -> None:
    collected = pytester.runpytest_subprocess("--tile-matrix", MATRIX, "--collect-only", "-q")
    ids = [line.split("::")[1] for line in collected.outlines if "::" in line]
    family = read_offered(find_sources()).family("mxfp8_gemm_cutlass_sm120")
    for out in ("bf16", "fp16"):
        named = {(i.split("-")[3], "-swapab-" in i) for i in ids if i.startswith(f"sm120-mxfp8-{out}-")}
        assert named == {(shape_label(t.cta), t.swap_ab) for t in family.tactics}
    assert len(ids) == 2 * len(family.tactics)


def test_the_shipped_fp4_matrix_names_every_fp4_tactic_flashinfer_offers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the runner's 32 SM120 NVFP4 tactics (8 tiles x swap_ab x stream-K) once per output type."""
    monkeypatch.delenv("CI", raising=False)
    shutil.copy(REPO / "matrices" / FP4_MATRIX, pytester.path / FP4_MATRIX)
    collected = pytester.runpytest_subprocess("--tile-matrix", FP4_MATRIX, "--collect-only", "-q")
    ids = [line.split("::")[1] for line in collected.outlines if "::" in line]
    family = read_offered(find_sources()).family("fp4_gemm_cutlass_sm120")
    for out in ("bf16", "fp16"):
        named = [
            (i.split("-")[3], "-swapab-" in i, "-streamk-" in i)
            for i in ids
            if i.startswith(f"sm120-nvfp4-{out}-")
        ]
        assert sorted(named) == sorted((shape_label(t.cta), t.swap_ab, t.stream_k) for t in family.tactics)
    assert len(ids) == 2 * len(family.tactics)
    assert len(family.tactics) == 32 and {t.stream_k for t in family.tactics} == {False, True}


@pytest.mark.slow
def test_one_tactic_judged_on_the_virtual_sm120(pytester: pytest.Pytester, matrix: Path) -> None:
    args = ("--tile-matrix", MATRIX, "--tile-device", "virtual", "--tile-build-jobs", "1", "-k", CASE)
    run = pytester.runpytest_subprocess(*args, "--tile-report", "r.json", timeout=1500)
    assert run.ret == 0, run.stdout.str()[-3000:]
    (entry,) = json.loads((pytester.path / "r.json").read_text())["cases"]
    verdict = entry["verdict"]
    assert entry["id"] == CASE and entry["outcome"] == "unrun"  # a virtual pass: no kernel ran
    assert entry["case"]["swap_ab"] is False and entry["case"]["mnk"] == "256x256x512"
    assert (verdict["source"], verdict["judged_through"]) == ("virtual (sm120 profile)", "launch")
    assert verdict["extra"]["module"] == "mxfp8_gemm_cutlass_sm120" and verdict["extra"]["tactic"] == 4
    assert verdict["smem_limit"] == 101376 and 0 < verdict["smem_requested"] <= 101376


#: SM90 fpA_intB tactic 13 (CTA 128x128x64 in bf16, cluster 1x1x1): W4A16, bf16 scales per 128
SM90_MATRIX = "gemm-sm90-fpaintb.yaml"
SM90_CASE = "sm90-bf16xint4-bf16-128x128x64-g128-m300n768k1024"


@pytest.mark.slow
def test_one_fpaintb_tactic_judged_on_the_virtual_sm90(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tactics probe and one unit built as FlashInfer's JIT builds the operation, driven
    through the runner's workspace, can_implement, initialize and run on the virtual sm90."""
    monkeypatch.delenv("CI", raising=False)
    shutil.copy(REPO / "matrices" / SM90_MATRIX, pytester.path / SM90_MATRIX)
    args = (
        "--tile-matrix",
        SM90_MATRIX,
        "--tile-device",
        "virtual",
        "--tile-build-jobs",
        "1",
        "-k",
        SM90_CASE,
    )
    run = pytester.runpytest_subprocess(*args, "--tile-report", "r.json", timeout=1500)
    assert run.ret == 0, run.stdout.str()[-3000:]
    (entry,) = json.loads((pytester.path / "r.json").read_text())["cases"]
    verdict = entry["verdict"]
    assert entry["id"] == SM90_CASE and entry["outcome"] == "unrun"
    assert entry["case"]["cluster"] == "1x1x1" and entry["case"]["group"] == 128
    assert (verdict["source"], verdict["judged_through"]) == ("virtual (sm90 profile)", "launch")
    assert verdict["extra"]["module"] == "fpA_intB_gemm_sm90" and verdict["extra"]["tactic"] == 13
    # the runner's workspace on the virtual H200 (132 SMs): stream-K's worst case, 128 x 256 fp32 tiles
    assert verdict["workspace_bytes"] == (4 * 132 + 132) * 128 * 256 * 4
