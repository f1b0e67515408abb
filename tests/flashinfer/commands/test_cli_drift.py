"""tileconform drift: heuristic (offered) x dispatch x generator x observed verdicts.

``data/tactics-sm120-flashinfer-0.7.4.jsonl`` is what the tactics probe printed for sm120 with
FlashInfer 0.7.4 (``tileconform drift --arch sm120 --save-tactics``). ``data/tactics-sm120-drift.jsonl``
is a drift fixture made from its nvfp4 -> bf16 runner: the swap_ab 128x32x128 tactics are removed
(instantiated, never offered), and two tactics are added to GEMM 1: CtaShape128x128x256B, which
the dispatch rejects (as FlashInfer's heuristic offered before PR #2984), and CtaShape128x16x64B,
which the dispatch accepts but the generator does not instantiate.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections import Counter
from pathlib import Path

import pytest
from helpers.evidence import document as report_document
from helpers.evidence import matrix_report_groups, matrix_reports, report
from helpers.paths import DATA

from pytest_tileconform.commands.cli import main
from pytest_tileconform.dtypes import label_dtypes
from pytest_tileconform.flashinfer.commands.drift import (
    FLAG_ALWAYS_FAILS,
    FLAG_NEVER_JUDGED,
    FLAG_NOT_INSTANTIATED,
    FLAG_REJECTED,
    INFO_NOT_OFFERED,
    ConfigKey,
    compare,
)
from pytest_tileconform.flashinfer.generator import generated_ops
from pytest_tileconform.flashinfer.sources import FlashInferSources
from pytest_tileconform.flashinfer.tactics.offered import parse
from pytest_tileconform.results.store import parse_results, read_results

REPO = DATA.parent.parent
SM120_RESULTS = report("sm120-virtual")
RECORDED = DATA / "tactics-sm120-flashinfer-0.7.4.jsonl"
FIXTURE = DATA / "tactics-sm120-drift.jsonl"


@pytest.fixture(scope="module")
def sources(generator_sources: FlashInferSources) -> FlashInferSources:
    return generator_sources


@pytest.fixture(scope="module")
def flashinfer_074(sources):  # type: ignore[no-untyped-def]
    if sources.version != "0.7.4":
        pytest.skip(f"the recorded probe output is FlashInfer 0.7.4's, installed is {sources.version}")
    return sources


def test_fixture_disagreements_are_flagged(flashinfer_074) -> None:  # type: ignore[no-untyped-def]
    tactics = parse(FIXTURE.read_text().splitlines())
    results = [read_results(SM120_RESULTS)]
    drift = compare("sm120", tactics, generated_ops(flashinfer_074, "sm120"), results)
    flagged = {
        (r.key.tile, r.key.swap_ab, r.key.fusion): r.flags
        for r in drift.flagged
        if r.key.dtypes == "nvfp4-bf16"
    }
    assert flagged == {
        ((128, 16, 128), False, "none"): [FLAG_NOT_INSTANTIATED],
        ((128, 128, 512), False, "none"): [FLAG_NOT_INSTANTIATED, FLAG_REJECTED],
        ((128, 256, 128), False, "finalize"): [FLAG_ALWAYS_FAILS],
        ((256, 128, 128), False, "finalize"): [FLAG_ALWAYS_FAILS],
    }
    assert len(drift.flagged) == 4
    rows = {r.key: r for r in drift.rows}
    dropped = ConfigKey("nvfp4-bf16", (128, 32, 128), (1, 1, 1), True, "none")
    assert rows[dropped].info == [INFO_NOT_OFFERED] and not rows[dropped].flags
    ok = rows[ConfigKey("nvfp4-bf16", (128, 128, 128), (1, 1, 1), False, "none")]
    assert ok.offered == [(1, 1), (2, 18)] and ok.dispatch == {"accepted"} and ok.generated
    # a virtual verdict: every host-side stage passed, the kernel did not run
    assert ok.verdicts == {"unrun": 1} and not ok.flags


def test_a_virtual_pass_is_unrun_in_the_table(flashinfer_074, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """The sm120 report was judged on the virtual device: its passes read ``unrun`` in column
    (d), never ``pass``; the H200's sm90 reports ran their kernels and read ``pass``."""
    assert main(["drift", "--arch", "sm120", "--tactics", str(RECORDED), str(SM120_RESULTS)]) == 0
    out = capsys.readouterr().out
    start = "| nvfp4-bf16 | 128x128x128 | 1x1x1 | false | none |"
    row = next(line for line in out.splitlines() if line.startswith(start))
    assert "| unrun x1 |" in row
    assert not [line for line in out.splitlines() if "| pass x" in line]
    assert main(["drift", "--arch", "sm90", "--tactics", str(SM90_SM100), *map(str, SM90_MIXED_RESULTS)]) == 0
    table = capsys.readouterr().out
    assert "| pass x1 |" in table and "unrun x" not in table


def test_a_passing_verdict_clears_always_failing(flashinfer_074) -> None:  # type: ignore[no-untyped-def]
    tactics = parse(FIXTURE.read_text().splitlines())
    failing = read_results(SM120_RESULTS)
    rerun = report_document(SM120_RESULTS)
    for entry in rerun["cases"]:
        if entry["verdict"] and entry["verdict"]["outcome"] == "initialize":
            entry["verdict"].update(outcome="pass", failed_stage=None)
    drift = compare("sm120", tactics, generated_ops(flashinfer_074, "sm120"), [failing, parse_results(rerun)])
    assert not [r for r in drift.flagged if FLAG_ALWAYS_FAILS in r.flags]


def test_strict_exit_status(flashinfer_074, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    argv = ["drift", "--arch", "sm120", "--tactics", str(FIXTURE), str(SM120_RESULTS)]
    assert main(argv) == 0
    assert main([*argv, "--strict"]) == 1
    assert main([*argv, "--strict", "--flagged-only"]) == 1
    out = capsys.readouterr().out.split("# Drift")[-1]
    table = [line for line in out.splitlines() if line.startswith("| nvfp4")]
    assert len(table) == 4
    assert "rejected: [TensorRT-LLM][ERROR] Assertion failed: Unsupported tile shape config 128128256" in out


def test_installed_flashinfer_074_sm120(flashinfer_074, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """FlashInfer 0.7.4 itself: every offered SM120 tactic is accepted and instantiated; only the
    two finalize tiles the virtual sm120 device rejects at initialize are flagged."""
    argv = ["drift", "--arch", "sm120", "--tactics", str(RECORDED)]
    assert main([*argv, "--strict"]) == 0
    assert (
        "88 configuration(s) for sm120: nothing flagged; 0 instantiated, never offered."
        in capsys.readouterr().out
    )
    assert main([*argv, str(SM120_RESULTS), "--strict", "--flagged-only"]) == 1
    out = capsys.readouterr().out
    assert "2 offered, always fails" in out


def test_results_option_is_a_deprecated_alias(flashinfer_074, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    argv = ["drift", "--arch", "sm120", "--tactics", str(RECORDED), "--flagged-only"]
    assert main([*argv, str(SM120_RESULTS)]) == 0
    positional = capsys.readouterr()
    assert main([*argv, "--results", str(SM120_RESULTS)]) == 0
    deprecated = capsys.readouterr()
    assert deprecated.out == positional.out and "`sm120-virtual-2026-11-29.json.gz`" in positional.out
    assert "--results is deprecated" in deprecated.err and "deprecated" not in positional.err


def test_the_probe_build_is_announced(
    flashinfer_074: FlashInferSources,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --tactics the probe is compiled first (a minute or more): stderr says so before."""
    import pytest_tileconform.flashinfer.tactics.offered as tactics
    from pytest_tileconform.flashinfer.commands import inputs

    said: list[str] = []

    def offered(*_args: object) -> list[str]:
        said.append(capsys.readouterr().err)
        return RECORDED.read_text().splitlines()

    monkeypatch.setattr(tactics, "offered_tactics", offered)
    argv = ["drift", "--arch", "sm120", "--cache-dir", str(tmp_path)]
    assert main(argv) == 0
    assert "building the tactics probe from FlashInfer 0.7.4's sources with nvcc" in said[0]
    monkeypatch.setattr(inputs, "probe_built", lambda *_args: True)
    assert main(argv) == 0
    assert "building" not in said[1] and "asking FlashInfer 0.7.4's heuristic" in said[1]


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["--arch", "sm120", "--tactics", "/nonexistent.jsonl"], "cannot read /nonexistent.jsonl", 2),
        (["--arch", "sm120", "/nonexistent.json"], "/nonexistent.json: cannot read", 2),
    ],
)
def test_bad_input(
    sources: FlashInferSources, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, status: int
) -> None:
    assert main(["drift", *argv]) == status
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_corrupt_tactics_file(sources, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "t.jsonl"
    bad.write_text(RECORDED.read_text().splitlines()[0] + "\n{oops\n")
    assert main(["drift", "--arch", "sm120", "--tactics", str(bad)]) == 3
    assert "line 2 is not JSON" in capsys.readouterr().err


@pytest.mark.slow
def test_probe_reproduces_the_recorded_output(flashinfer_074, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Builds the tactics probe (about 65 s and 2 GB once; cached in the suite's build cache) and asks
    the installed FlashInfer itself: its output for sm120 must be the recorded one."""
    from pytest_tileconform.compile.cache import default_cache_dir
    from pytest_tileconform.flashinfer.tactics.offered import offered_tactics

    lines = offered_tactics(flashinfer_074, ["sm120"], default_cache_dir())
    assert lines == RECORDED.read_text().splitlines()
    assert importlib.metadata.version("flashinfer-python") == "0.7.4"


SM90_SM100 = DATA / "tactics-sm90-sm100-flashinfer-0.7.4.jsonl"
SM10X_RESULTS, *SM100_CPU_RESULTS = matrix_report_groups("sm100-flashinfer.yaml")
SM90_RESULTS = matrix_reports("sm90.yaml")
SM90_MIXED_RESULTS = matrix_reports("sm90-mixed-flashinfer.yaml")


def test_sm90_mixed_input_tactics_are_the_generators_kernels(flashinfer_074) -> None:  # type: ignore[no-untyped-def]
    """SM90's mixed-input runners (W4A8 int4, W4A16 MXFP4, MXFP4 x FP8), told apart by mainloop:
    every TMA tactic FlashInfer offers is one of the kernels its generator instantiates; of CTA
    M >= 128 the heuristic offers the Cooperative kernels but 128x128x512's, which it offers as
    Pingpong, so 68 per runner are compiled and never offered. The recorded H200 slices judge
    every kernel; the offered ones that always fail are the only ones flagged."""
    tactics = [t for t in parse(SM90_SM100.read_text().splitlines()) if t.sm == 90]
    generated = generated_ops(flashinfer_074, "sm90")
    drift = compare("sm90", tactics, generated)
    mixed = [r for r in drift.rows if len(set(label_dtypes(r.key.dtypes)[:2])) == 2]
    assert {r.key.dtypes for r in mixed} == {
        "fp8_e4m3xint4-fp16",
        "fp8_e4m3xint4-bf16",
        "bf16xmxfp4-bf16",
        "fp8_e4m3xmxfp4-fp16",
        "fp8_e4m3xmxfp4-bf16",
    }
    offered = [r for r in mixed if r.offered]
    assert len(mixed) == 940 and len(offered) == 600
    assert all(r.generated and r.dispatch == {"accepted"} for r in offered)
    unoffered = {(r.key.variant, r.key.tile) for r in mixed if not r.offered}
    big = {(variant, tile) for variant, tile in unoffered if tile[0] >= 128}
    assert unoffered == big and ("cooperative", (128, 128, 512)) in unoffered
    assert {variant for variant, tile in unoffered if tile != (128, 128, 512)} == {"pingpong"}
    assert not drift.flagged
    results = [read_results(p) for p in (*SM90_RESULTS, *SM90_MIXED_RESULTS)]
    with_results = compare("sm90", tactics, generated, results)
    flagged = {r.key: r.flags for r in with_results.flagged}
    judged = {r.key for r in offered} - flagged.keys()
    # the offered kernels among the recorded cases that pass
    assert len(judged) == 584
    # four W4A16 MXFP4 tiles FlashInfer offers, at each of their four clusters, ask an H200 for
    # more shared memory than it has (235,520-366,592 > 232,448 bytes) and fail at initialize
    always = {(k.tile, k.variant) for k, flags in flagged.items() if flags == [FLAG_ALWAYS_FAILS]}
    assert always == {
        ((64, 128, 512), "pingpong"),
        ((128, 128, 512), "pingpong"),
        ((128, 256, 256), "cooperative"),
        ((256, 128, 256), "cooperative"),
    }
    assert {k.dtypes for k, flags in flagged.items() if flags == [FLAG_ALWAYS_FAILS]} == {"bf16xmxfp4-bf16"}
    assert flagged.keys() == {r.key for r in offered} - judged
    assert len(flagged) == 16 and all(flags == [FLAG_ALWAYS_FAILS] for flags in flagged.values())


def test_sm100_kernels_judged_by_the_recorded_slices(flashinfer_074) -> None:  # type: ignore[no-untyped-def]
    """The recorded SM100 slices judge every offered kernel but the bf16 / fp16 / fp32 TMA ones
    not in them and the activation-fusion kernels (offered by GEMM 1 tactics under ClampedRelu2);
    a kernel the dispatch refuses is flagged as refused, never as unjudged."""
    tactics = [t for t in parse(SM90_SM100.read_text().splitlines()) if t.sm == 100]
    results = [read_results(path) for path in SM10X_RESULTS]
    drift = compare("sm100", tactics, generated_ops(flashinfer_074, "sm100"), results)
    never = [r for r in drift.rows if FLAG_NEVER_JUDGED in r.flags]
    assert never and all(FLAG_REJECTED not in r.flags for r in never)
    fused = [r for r in never if r.key.fusion == "activation"]
    assert {r.key.dtypes for r in fused} == {"bf16", "mxfp8-bf16", "mxfp8-fp16"} and len(fused) == 63
    assert all(r.offered and {g for g, _ in r.offered} == {1} for r in fused)
    assert {r.key.dtypes for r in never if r not in fused} <= {"bf16", "fp16", "fp32"}
    assert all(r.key.variant.startswith("tma") for r in never)
    # with the slices judged on the CPU machine, every offered kernel the dispatch takes is judged
    cpu = [path for group in SM100_CPU_RESULTS for path in group]
    every = compare(
        "sm100", tactics, generated_ops(flashinfer_074, "sm100"), results + [read_results(p) for p in cpu]
    )
    assert not any(FLAG_NEVER_JUDGED in r.flags for r in every.rows)


SM103 = DATA / "tactics-sm103-flashinfer-0.7.4.jsonl"


def test_sm103_tactics_are_its_two_kernel_sets(flashinfer_074) -> None:  # type: ignore[no-untyped-def]
    """On sm103 the dispatch sends NVFP4 tactics of CTA 128x128 and 128x256 to SM103's own
    kernels and every other tactic to SM100's kernel set, which FlashInfer's sm103 module also
    compiles: each accepted tactic is one of the generator's sm103 kernels (the dispatch refuses
    and lacks the same ones as on sm100); every kernel of SM103's own set is judged by the
    shipped reports, and so is every one of SM100's set: no offered kernel is left unjudged, and
    only the tactics the dispatch refuses are flagged."""
    tactics = [t for t in parse(SM103.read_text().splitlines()) if t.sm == 103]
    sm100 = [t for t in parse(SM90_SM100.read_text().splitlines()) if t.sm == 100]
    generated = generated_ops(flashinfer_074, "sm103")
    drift = compare("sm103", tactics, generated)
    accepted = [r for r in drift.rows if r.dispatch == {"accepted"}]
    assert accepted and all(r.generated for r in accepted)
    own = {r.key for r in accepted if not r.key.variant.endswith("+sm100kernel")}
    assert own and {k.dtypes for k in own} == {"nvfp4-bf16", "nvfp4-fp16"}
    assert {k.tile[:2] for k in own} == {(128, 128), (128, 256)}
    on_sm100 = compare("sm100", sm100, generated_ops(flashinfer_074, "sm100"))
    flags = Counter(f for r in drift.rows for f in r.flags)
    assert flags == Counter(f for r in on_sm100.rows for f in r.flags) and flags[FLAG_REJECTED] == 480
    reports = matrix_reports("sm103-flashinfer.yaml")
    judged = compare("sm103", tactics, generated, [read_results(p) for p in reports])
    assert not any(FLAG_NEVER_JUDGED in r.flags for r in judged.rows)
    assert {frozenset(r.flags) for r in judged.flagged} == {frozenset({FLAG_REJECTED, FLAG_NOT_INSTANTIATED})}


def _body(path: Path) -> list[str]:
    """The output less what names the results files or the time it was written."""
    return [
        line for line in path.read_text().splitlines() if ".json" not in line and "generated_at" not in line
    ]


def test_another_backends_cases_in_a_results_file_are_left_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of both FlashInfer backends writes one results file: drift, tactics and
    export-blocklist read its MoE cases and leave the dense backend's (swap_ab, stream_k, mnk)
    out, as if the file held the MoE ones only; a record with a bad value is still an error."""
    dense = matrix_reports("gemm-sm120.yaml")[0]
    replay = ["--tactics", str(RECORDED), "--arch", "sm120"]
    commands = [
        ["drift", *replay],
        ["tactics", *replay, "--dtype", "nvfp4-bf16"],
        ["export-blocklist", *replay, "--accept-virtual", "--gpu", "NVIDIA GeForce RTX 5090"],
    ]
    for argv in commands:
        alone, both = tmp_path / "alone.out", tmp_path / "both.out"
        assert main([*argv, str(SM120_RESULTS), "-o", str(alone)]) == 0, argv
        assert main([*argv, str(SM120_RESULTS), str(dense), "-o", str(both)]) == 0, capsys.readouterr().err
        assert _body(both) == _body(alone), argv
    bad = report_document(SM120_RESULTS)
    bad["cases"][0]["case"]["cluster"] = "one by one"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(bad))
    assert main(["drift", *replay, str(broken)]) == 2
    assert "that is not FlashInfer's: cluster" in capsys.readouterr().err
