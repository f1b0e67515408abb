"""What a release lacks is read from its own sources, and the tool's inability to build a family
is reported as such (a skip naming release, family and piece), never as a kernel's verdict."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.fake_backend import QUIET, TileRun, output
from helpers.release_pieces import EVERY_PIECE
from helpers.stand_in_flashinfer import STAND_IN_NVCC_PLUGIN
from helpers.wheels import KEPT, NV, make_wheel

from pytest_tileconform.commands.cli import main as cli
from pytest_tileconform.flashinfer.codegen import generate_translation_unit, instantiation, probe_unit
from pytest_tileconform.flashinfer.compat import harness_error
from pytest_tileconform.flashinfer.configs import KernelConfig
from pytest_tileconform.flashinfer.features import (
    GEMM_INPUT_H,
    INTERLEAVE_FUNCTIONS,
    MIXED_MAINLOOP_HPP,
    family,
    harness_defines,
    missing_piece,
    release_features,
)
from pytest_tileconform.flashinfer.probe import PROBES_DIR, ReleaseProbe
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL, MIXED_LAUNCHER_INL, MIXED_UTILS_CU

W4A16 = KernelConfig(
    90, "bf16", "mxfp4", "bf16", (128, 64, 128), (1, 1, 1), True, "none", mainloop="pingpong"
)
FP8_MXFP4 = replace(W4A16, act="fp8_e4m3")
SMALL_K = replace(FP8_MXFP4, tile=(128, 16, 128), mainloop="single_warpgroup_prefill")
BF16 = KernelConfig(90, "bf16", "bf16", "bf16", (128, 128, 64), (1, 1, 1), False, "none")
ACTIVATION = KernelConfig(100, "bf16", "bf16", "bf16", (128, 64, 64), (1, 1, 1), False, "activation", "tma")


def sources(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "csrc" / "nv_internal" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


#: Shaped like FlashInfer 0.6.12: the mixed launcher without SafeFP4, small-K or pre-MMA scales and
#: with its scales packed per CTA K, its mainloop reading B interleaved, two of the three
#: interleave kernels, no activation fusion and no precomputed scheduler
OLD = {
    GEMM_INPUT_H: "struct TmaWarpSpecializedGroupedGemmInput { FusedFinalizeEpilogue epilogue; };",
    LAUNCHER_INL: "#if defined(ENABLE_FP4)\nusing SafeFP4 = __nv_fp4_e2m1;\n#endif\n",
    MIXED_LAUNCHER_INL: "void sm90_generic_mixed_moe_gemm_kernelLauncher(GroupedGemmInput<T> inputs);\n"
    "  constexpr int PackedScalesNum = get<2>(CTAShape{}) / group_size;\n"
    "using ElementScalePacked = cutlass::Array<ElementScale, PackedScalesNum>;\n",
    MIXED_UTILS_CU: "void interleave_int4_weights_for_sm90_mixed_gemm();\n"
    "void interleave_fp4_weights_for_sm90_mixed_gemm();\n",
    MIXED_MAINLOOP_HPP: "Utils::copy_tensors_A(smem_tiled_copy_A_LDSM, tCsA_LDSM, v, 0, read_stage);\n",
}
#: Shaped like FlashInfer 0.5.3 - 0.6.6: OLD's packed scales, B read as stored, no interleave kernels
OLDEST = {
    **{name: text for name, text in OLD.items() if name != MIXED_UTILS_CU},
    MIXED_MAINLOOP_HPP: "Utils::copy_tensors_MK(smem_tiled_copy_A, tCsA, v, extra, copies, 0, read_stage);\n",
}
#: Shaped like FlashInfer 0.7.4: every piece
NEW = {
    GEMM_INPUT_H: "FusedActivationEpilogue fused_activation_epilogue;\n"
    "size_t precomputed_scheduler_workspace_size;",
    LAUNCHER_INL: "using SafeFP4 = Fp4Type;\n",
    MIXED_LAUNCHER_INL: "using SafeFP4 = Fp4Type;\nvoid sm90_generic_mixed_moe_gemm_kernelLauncher();\n"
    "void sm90_generic_mixed_moe_small_k_kernelLauncher();\nMixedInputScaleMode::kPreMmaE8M0\n",
    MIXED_UTILS_CU: "\n".join(f"void {name}();" for name in INTERLEAVE_FUNCTIONS),
    MIXED_MAINLOOP_HPP: OLD[MIXED_MAINLOOP_HPP],
}


def test_what_a_release_lacks_is_read_from_its_sources(tmp_path: Path) -> None:
    old = release_features(sources(tmp_path / "old", OLD))
    new = release_features(sources(tmp_path / "new", NEW))
    assert new == EVERY_PIECE
    assert not (old.activation_fusion or old.precomputed_scheduler or old.mixed_fp4_alias)
    assert old.interleaves == (True, True, False) and old.uniform_fp4_alias and old.mixed_launcher
    assert old.mixed_packed_scales and not new.mixed_packed_scales
    assert "TILECONFORM_HAS_ACTIVATION_FUSION 0" in harness_defines(old)
    assert "TILECONFORM_HAS_INTERLEAVE_2 0" in harness_defines(old)
    assert "TILECONFORM_HAS_PRECOMPUTED_SCHEDULER 1" in harness_defines(new)
    # packed scales and interleaved B: made by the harness, as the release's sources say
    assert old.mixed_packed_scales and old.mixed_pack_rule and old.mixed_weights == "interleaved"
    assert "TILECONFORM_MIXED_PACKED_SCALES 1" in harness_defines(old)
    assert "TILECONFORM_MIXED_PACKED_SCALES 0" in harness_defines(new)
    # ... a pair the harness makes (packed scales, B through the release's interleave kernel)
    assert missing_piece(old, W4A16) is None
    assert missing_piece(old, replace(W4A16, act="fp8_e4m3", weight="int4")) is None
    # the pieces a configuration needs and the release lacks, each named with its file
    packed = missing_piece(replace(old, mixed_pack_rule=False), W4A16)  # packed another way
    assert packed is not None and "reads the group scales packed per CTA K (ElementScalePacked)" in packed
    unknown = missing_piece(replace(old, mixed_weights=None), W4A16)
    assert unknown is not None and unknown.startswith(f"{MIXED_MAINLOOP_HPP} reads B neither")
    # B read as stored: no interleave kernel needed, none included, none called
    oldest = release_features(sources(tmp_path / "oldest", OLDEST))
    assert oldest.mixed_weights == "stored" and oldest.interleaves == (False, False, False)
    assert (
        missing_piece(oldest, W4A16) is None
        and missing_piece(oldest, replace(W4A16, act="fp8_e4m3", weight="int4")) is None
    )
    unit = generate_translation_unit([W4A16], oldest)
    assert MIXED_UTILS_CU not in unit and "#define TILECONFORM_MIXED_INTERLEAVED_WEIGHTS 0" in unit
    assert MIXED_UTILS_CU in generate_translation_unit([W4A16], old)
    old = replace(old, mixed_packed_scales=False)
    assert (
        missing_piece(old, ACTIVATION)
        == f"{GEMM_INPUT_H} has no fused_activation_epilogue (EpilogueFusion::ACTIVATION)"
    )
    fp8 = missing_piece(old, FP8_MXFP4)
    assert fp8 is not None and fp8.startswith(
        f"{MIXED_UTILS_CU} has no interleave_fp4_fp8_weights_for_sm90_mixed_gemm"
    )
    small_k = missing_piece(replace(old, interleaves=(True, True, True)), SMALL_K)
    assert small_k == f"{MIXED_LAUNCHER_INL} defines no sm90_generic_mixed_moe_small_k_kernelLauncher"
    pre_mma = missing_piece(replace(old, interleaves=(True, True, True)), FP8_MXFP4)
    assert pre_mma is not None and "kPreMmaE8M0" in pre_mma
    assert all(missing_piece(new, c) is None for c in (W4A16, FP8_MXFP4, SMALL_K, ACTIVATION, BF16))
    nothing = release_features(tmp_path / "empty")
    assert (
        missing_piece(nothing, W4A16)
        == f"{MIXED_LAUNCHER_INL} defines no sm90_generic_mixed_moe_gemm_kernelLauncher"
    )


def test_the_unit_names_the_types_the_release_declares(tmp_path: Path) -> None:
    """FlashInfer 0.6.12's mixed launcher declares no SafeFP4 (its generator names
    __nv_fp4_e2m1): the unit must not name the alias there, as it does where it exists."""
    old = release_features(sources(tmp_path / "old", OLD))
    unit = generate_translation_unit([W4A16], old)
    assert "SafeFP4" not in unit and "using Weight = __nv_fp4_e2m1;" in unit
    assert "sm90_generic_mixed_moe_gemm_kernelLauncher<__nv_bfloat16, __nv_fp4_e2m1," in instantiation(
        W4A16, old
    )
    assert "using Weight = tensorrt_llm::kernels::cutlass_kernels_oss::SafeFP4;" in generate_translation_unit(
        [W4A16], EVERY_PIECE
    )
    assert "#define TILECONFORM_HAS_PRECOMPUTED_SCHEDULER 0" in unit
    # the uniform launcher declares SafeFP4 in every release the harness judges
    nvfp4 = KernelConfig(120, "nvfp4", "nvfp4", "bf16", (128, 256, 128), (1, 1, 1), False, "finalize")
    assert "Sm120, SafeFP4, SafeFP4, __nv_bfloat16" in instantiation(nvfp4, old)


def test_a_probe_names_the_launcher_without_instantiating_it() -> None:
    unit = probe_unit([BF16, replace(BF16, fusion="finalize")], EVERY_PIECE)
    assert "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM" not in unit
    assert unit.count("static constexpr decltype(&tensorrt_llm::kernels::cutlass_kernels_oss::") == 2
    assert "&tileconform::run_case<tileconform::cases::Case1>" in unit  # the harness is instantiated
    assert "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM" in generate_translation_unit([BF16], EVERY_PIECE)


#: A stand-in front end: fails like nvcc when the probe unit holds an fp32 case
FAKE_FRONT_END = """
import sys
text = open(sys.argv[1]).read()
open(sys.argv[2] + ".ran", "a").write("x")
if "sm90_fp32" in text:
    print(sys.argv[1] + "(12): error: identifier \\"Fp32Thing\\" is undefined")
    sys.exit(2)
"""


def test_probes_are_per_family_grouped_and_cached(tmp_path: Path) -> None:
    script = tmp_path / "front_end.py"
    script.write_text(FAKE_FRONT_END)
    runs = tmp_path / "runs"

    def front_end(config: KernelConfig, src: Path, out: Path) -> list[str]:
        return [sys.executable, str(script), str(src), str(runs)]

    def probe() -> ReleaseProbe:
        return ReleaseProbe(tmp_path / "cache", EVERY_PIECE, "salt", front_end, lambda c: f"nvcc sm{c.arch}")

    fp32 = replace(BF16, act="fp32", weight="fp32", out="fp32", tile=(128, 64, 32))
    configs = [BF16, replace(BF16, tile=(128, 256, 64)), replace(BF16, fusion="finalize"), fp32, W4A16]
    first = probe()
    first.probe(configs, jobs=2)
    # one unit for the uniform families (it fails), then one for each; one for the mixed family
    assert len((tmp_path / "runs.ran").read_text()) == 1 + 3 + 1
    assert first.known[family(BF16)] is None and first.known[family(W4A16)] is None
    limit = first.known[family(fp32)]
    assert limit is not None and limit.family == "sm90 fp32 x fp32 -> fp32 none"
    assert 'error: identifier "Fp32Thing" is undefined' in limit.piece
    assert limit.reason("0.6.4").startswith(
        "the tool cannot build sm90 fp32 x fp32 -> fp32 none against FlashInfer 0.6.4:"
    )
    # a second session reads the answers: nothing runs again
    second = probe()
    second.probe(configs, jobs=1)
    assert len((tmp_path / "runs.ran").read_text()) == 5
    assert second.known == first.known
    assert len(list((tmp_path / "cache" / PROBES_DIR).glob("*.json"))) == 5
    assert second.limitation(ACTIVATION) is None  # a family not seen yet: probed
    assert len((tmp_path / "runs.ran").read_text()) == 6
    # a missing piece is known without running anything
    old = ReleaseProbe(
        tmp_path / "cache", replace(EVERY_PIECE, activation_fusion=False), "salt", front_end, str
    )
    missing = old.limitation(ACTIVATION)
    assert missing is not None and "fused_activation_epilogue" in missing.piece
    assert len((tmp_path / "runs.ran").read_text()) == 6


def test_no_probe_runs_past_the_build_limit(tmp_path: Path) -> None:
    """--tile-build-limit bounds the probes too: past the build's deadline none starts, and the
    family is left unanswered (nothing cached), not refused."""
    script = tmp_path / "front_end.py"
    script.write_text(FAKE_FRONT_END)
    runs = tmp_path / "runs"

    def front_end(config: KernelConfig, src: Path, out: Path) -> list[str]:
        return [sys.executable, str(script), str(src), str(runs)]

    fp32 = replace(BF16, act="fp32", weight="fp32", out="fp32", tile=(128, 64, 32))
    probe = ReleaseProbe(tmp_path / "cache", EVERY_PIECE, "salt", front_end, str)
    probe.clock = lambda: 100.0
    assert probe.limitations([fp32], jobs=1, deadline=100.0) == {}
    assert not (tmp_path / "runs.ran").exists() and not (tmp_path / "cache" / PROBES_DIR).exists()
    later = ReleaseProbe(tmp_path / "cache", EVERY_PIECE, "salt", front_end, str)
    later.clock = lambda: 100.0
    assert list(later.limitations([fp32], jobs=1, deadline=160.0)) == [fp32]  # before it: probed
    assert len((tmp_path / "runs.ran").read_text()) == 1


def test_errors_in_the_generated_unit_are_the_tools(tmp_path: Path) -> None:
    """A name the generated unit uses that the release does not declare (FlashInfer 0.6.12 and
    SafeFP4, before features.py) fails in tu.cu: never a compile verdict."""
    assert harness_error(f'{tmp_path}/.build-x/abc/tu.cu(13): error: identifier "SafeFP4" is undefined')
    assert not harness_error(
        f"{tmp_path}/cutlass/include/cute/atom/mma_atom.hpp(90): error: static assertion failed"
    )


ACTIVATION_AND_BF16 = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
  - arch: sm100
    dtype: bf16
    tile: [{shape: 128x64x64, fusion: activation, epilogue: tma}]
    problems: {experts: 2, rows: 64, n: 256, k: 128}
"""


def test_a_release_the_tool_cannot_build_for_is_never_a_compile_verdict(
    tc: TileRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release whose sources lack what the generated unit names (this one's launcher is only
    its macro: no tma_warp_specialized_generic_moe_gemm_kernelLauncher, no GEMM input with
    fused_activation_epilogue): each family is skipped before any compile, naming the release,
    the family and the missing piece, and --tile-update records nothing."""
    wheel = make_wheel(tmp_path, "0.6.4", files={**KEPT, f"{NV}/{GEMM_INPUT_H}": "// no activation fusion\n"})
    matrix = tc.matrix(ACTIVATION_AND_BF16)
    before = matrix.read_text()
    report = tmp_path / "report.json"
    cache = tmp_path / "c"
    args = ("--tile-flashinfer", str(wheel), "--tile-cache-dir", str(cache), "--tile-device", "compile")
    result = tc.run(*args, "--tile-report", str(report), "--tile-update", "-rs", *QUIET)
    assert result.ret == 0, output(result)
    cases = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    assert all(c["outcome"] == "skipped" and c["verdict"] is None for c in cases.values()), cases
    activation = cases["sm100-bf16-128x64x64-c1x1x1-activation"]["skip_reason"]
    assert "the tool cannot build sm100 bf16 x bf16 -> bf16 activation against FlashInfer 0.6.4" in activation
    assert f"{GEMM_INPUT_H} has no fused_activation_epilogue" in activation
    bf16 = cases["sm90-bf16-128x64x64-c1x1x1-none"]["skip_reason"]
    assert "the tool cannot build sm90 bf16 x bf16 -> bf16 none against FlashInfer 0.6.4: " in bf16
    assert "error" in bf16  # nvcc's first error in the probe
    assert matrix.read_text() == before  # nothing recorded
    assert cli(["report", "apply", str(matrix), str(report)]) == 2  # nor by report apply
    assert "has a verdict in these files" in capsys.readouterr().err
    assert matrix.read_text() == before
    assert "compiling" not in output(result)  # no unit was compiled
    assert list((cache / PROBES_DIR).glob("*.json"))  # the probe's answer is kept for the next run


W4A8_AND_W4A16 = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype:
      - {act: fp8_e4m3, weight: int4, out: bf16}
      - {act: bf16, weight: mxfp4, out: bf16}
    tile: [{shape: 128x64x128, swap_ab: [true], fusion: [none], mainloop: pingpong}]
    problems: {experts: 2, rows: 64, n: 256, k: 256}
"""


def test_a_release_that_packs_scales_and_interleaves_b_is_built(tc: TileRun, tmp_path: Path) -> None:
    """A release shaped like 0.6.12 (scales packed per CTA K, B read interleaved): its W4A8 and
    W4A16 families are built with both layouts, not refused. The H200 judged 0.6.12 with them
    bit for bit on every tile its heuristic runs (results/releases/h200-2026-12-02-mixed-0612),
    so refusing the generation as the tool's limitation hid the kernel's own verdicts."""
    files = {**KEPT, **{f"{NV}/{name}": text for name, text in OLD.items() if name != LAUNCHER_INL}}
    wheel = make_wheel(tmp_path, "0.6.12", files=files)
    tc.pytester.makepyfile(stand_in_nvcc_plugin=STAND_IN_NVCC_PLUGIN)
    tc.pytester.syspathinsert()
    report, cache = tmp_path / "report.json", tmp_path / "c"
    tc.matrix(W4A8_AND_W4A16)
    result = tc.run_subprocess(
        *("--tile-flashinfer", str(wheel), "--tile-cache-dir", str(cache), "--tile-device", "compile"),
        *("-p", "stand_in_nvcc_plugin", "--tile-report", str(report), "-rs"),
    )
    assert result.ret == 0, output(result)
    cases = json.loads(report.read_text())["cases"]
    assert len(cases) == 2, cases
    # compiled, not skipped: a pass through compile is reported as unrun (the kernel did not run)
    assert all(c["outcome"] == "unrun" and c["verdict"]["judged_through"] == "compile" for c in cases), cases
    defines = (tc.path / "units.log").read_text().splitlines()
    assert "#define TILECONFORM_MIXED_PACKED_SCALES 1" in defines, defines
    assert "#define TILECONFORM_MIXED_INTERLEAVED_WEIGHTS 1" in defines, defines
