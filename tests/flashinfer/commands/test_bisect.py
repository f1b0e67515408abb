"""The bisection logic of ``tileconform bisect``, with a fake judge (no compiles)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_tileconform.core.runoptions import DeviceChoice
from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.commands.bisect import (
    NOT_JUDGEABLE,
    BisectError,
    Outcome,
    bisect,
    build_cases,
    configure_parser,
    main,
    outcome_of,
    select_releases,
    wheels_in,
)
from pytest_tileconform.verdict import Stage, Verdict

RELEASES = [f"0.6.{i}" for i in range(20)]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure_parser(parser)
    args = parser.parse_args(list(argv))
    args.cluster = args.cluster or ["1x1x1"]
    args.fusion = args.fusion or ["none"]
    args.swap_ab = args.swap_ab or ["false"]
    return args


CASE_ARGS = ("--arch", "sm120", "--dtype", "nvfp4:nvfp4:bf16", "--tile", "128x256x128")


@pytest.fixture
def cases() -> list[MoeCase]:
    return build_cases(parse(*CASE_ARGS, "--tile", "256x128x128", "--fusion", "none", "--fusion", "finalize"))


class FakeJudge:
    """Verdicts from a table: for each case, the releases (index) from which a verdict holds."""

    def __init__(self, timeline: dict[str, list[tuple[int, Outcome]]]) -> None:
        self.timeline = timeline
        self.calls: list[str] = []

    def __call__(self, release: str, cases: Sequence[MoeCase]) -> list[Outcome]:
        self.calls.append(release)
        index = RELEASES.index(release)
        outcomes = []
        for case in cases:
            steps = self.timeline.get(case.id, [(0, Outcome("pass", smem=98304))])
            outcomes.append([o for start, o in steps if start <= index][-1])
        return outcomes


FAIL = Outcome("initialize", "Error Internal", 102400)
FIXED = Outcome("pass", "", 98304)
FINALIZE = "sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize"


def test_cases_are_the_product_of_the_arguments(cases: list[MoeCase]) -> None:
    assert [c.id for c in cases] == [
        "sm120-nvfp4-bf16-128x256x128-c1x1x1-none",
        "sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize",
        "sm120-nvfp4-bf16-256x128x128-c1x1x1-none",
        "sm120-nvfp4-bf16-256x128x128-c1x1x1-finalize",
    ]
    assert {(c.axes.problem.rows, c.axes.problem.n, c.axes.problem.k) for c in cases} == {
        ((0, 1, 77, 300), 384, 512)
    }


def test_one_change_is_found_with_log_many_judgements(cases: list[MoeCase]) -> None:
    judge = FakeJudge({FINALIZE: [(0, FAIL), (13, FIXED)]})
    result = bisect(RELEASES, cases, judge)
    assert result.changes() == [("0.6.12", "0.6.13")]
    # 2 ends + ceil(log2(19)) = 5 midpoints at most, each release judged once
    assert len(judge.calls) == len(set(judge.calls)) <= 7
    assert {"0.6.0", "0.6.19", "0.6.12", "0.6.13"} <= set(judge.calls)
    assert result.unresolved() == []


def test_several_changes_in_several_cases(cases: list[MoeCase]) -> None:
    other = "sm120-nvfp4-bf16-256x128x128-c1x1x1-none"
    judge = FakeJudge(
        {
            FINALIZE: [(0, FAIL), (5, FIXED)],
            other: [(0, FIXED), (11, Outcome("compile", "compile error")), (16, FAIL)],
        }
    )
    result = bisect(RELEASES, cases, judge)
    assert result.changes() == [("0.6.4", "0.6.5"), ("0.6.10", "0.6.11"), ("0.6.15", "0.6.16")]
    assert len(judge.calls) < len(RELEASES)


def test_no_change_judges_only_the_ends(cases: list[MoeCase]) -> None:
    judge = FakeJudge({})
    result = bisect(RELEASES, cases, judge)
    assert judge.calls == ["0.6.0", "0.6.19"] and result.changes() == []


@pytest.mark.parametrize("count", [1, 2, 3])
def test_the_ends_are_always_judged(cases: list[MoeCase], count: int) -> None:
    releases = RELEASES[12 : 12 + count]  # 0.6.12 (failing) .. : 0.6.13 fixed it
    judge = FakeJudge({FINALIZE: [(0, FAIL), (13, FIXED)]})
    result = bisect(releases, cases, judge)
    assert set(judge.calls) == set(releases)
    assert result.changes() == ([] if count == 1 else [("0.6.12", "0.6.13")])


def test_all_judges_everything(cases: list[MoeCase]) -> None:
    judge = FakeJudge({FINALIZE: [(0, FAIL), (13, FIXED)]})
    result = bisect(RELEASES, cases, judge, everything=True)
    assert judge.calls == RELEASES and result.changes() == [("0.6.12", "0.6.13")]


def test_smem_alone_is_a_change(cases: list[MoeCase]) -> None:
    judge = FakeJudge({FINALIZE: [(0, FAIL), (7, Outcome("initialize", "Error Internal", 104448))]})
    assert bisect(RELEASES, cases, judge).changes() == [("0.6.6", "0.6.7")]


def test_not_judgeable_reasons_are_part_of_the_key(cases: list[MoeCase]) -> None:
    old = Outcome(NOT_JUDGEABLE, detail="macro takes 14 parameters")
    other = Outcome(NOT_JUDGEABLE, detail="header missing")
    judge = FakeJudge({FINALIZE: [(0, old), (3, other), (6, FIXED)]})
    assert bisect(RELEASES, cases, judge).changes() == [("0.6.2", "0.6.3"), ("0.6.5", "0.6.6")]


def test_a_change_undone_inside_an_agreeing_interval_is_not_seen_without_all(cases: list[MoeCase]) -> None:
    # the documented limit of bisection, and why --all exists
    judge = FakeJudge({FINALIZE: [(0, FIXED), (4, FAIL), (6, FIXED)]})
    assert bisect(RELEASES, cases, judge).changes() == []
    assert bisect(RELEASES, cases, judge, everything=True).changes() == [
        ("0.6.3", "0.6.4"),
        ("0.6.5", "0.6.6"),
    ]


def test_select_releases() -> None:
    listed = ["0.7.4", "0.6.7.post3", "0.6.7", "0.5.2", "0.5.3", "0.7.0rc1", "0.4.1", "0.6.10"]
    assert select_releases(listed, "0.5.3", "0.7.4") == ["0.5.3", "0.6.7", "0.6.7.post3", "0.6.10", "0.7.4"]
    assert select_releases(listed, "0.5.3", "0.7.4", skip_post=True)[-3:] == ["0.6.7", "0.6.10", "0.7.4"]
    assert select_releases(listed, None, "0.5.2") == ["0.4.1", "0.5.2"]
    with pytest.raises(BisectError, match=r"--from 0.7.4 is newer than --to 0.5.3"):
        select_releases(listed, "0.7.4", "0.5.3")
    with pytest.raises(BisectError, match=r"--to: 'newest' is not a version"):
        select_releases(listed, "0.5.3", "newest")
    with pytest.raises(BisectError, match=r"no release between 0.8.0 and the newest"):
        select_releases(listed, "0.8.0", None)


def test_wheels_folder(tmp_path: Path) -> None:
    for name in (
        "flashinfer_python-0.6.0-py3-none-any.whl",
        "flashinfer_python-0.5.3-py3-none-any.whl",
        "x.txt",
    ):
        (tmp_path / name).write_text("")
    assert sorted(wheels_in(tmp_path)) == ["0.5.3", "0.6.0"]
    with pytest.raises(BisectError, match="no flashinfer_python-"):
        wheels_in(tmp_path / "..")
    with pytest.raises(BisectError, match="no such folder"):
        wheels_in(tmp_path / "missing")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--tile", "128x256"), "--tile '128x256': expected MxNxK"),
        (("--dtype", "nvfp4:bf16"), "--dtype 'nvfp4:bf16': ACT:WEIGHT:OUT names three dtypes"),
        (("--dtype", "nvfp5:nvfp4:bf16"), "--dtype 'nvfp5:nvfp4:bf16': unknown activation dtype 'nvfp5'"),
        (("--swap-ab", "maybe"), "--swap-ab 'maybe': expected true or false"),
        (("--problem", "4:1,2:384"), "--problem '4:1,2:384': expected EXPERTS:ROWS"),
        (("--problem", "4:1,2,3:384:512"), "invalid case: .*experts=4 but rows lists 3"),
    ],
)
def test_bad_case_arguments(argv: tuple[str, ...], message: str) -> None:
    base = dict(zip(CASE_ARGS[::2], CASE_ARGS[1::2], strict=True))
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        base[flag] = value
    args = parse(*(part for item in base.items() for part in item))
    with pytest.raises(BisectError, match=message):
        build_cases(args)


@pytest.mark.parametrize("argv", [("--arch", "gfx90"), ("--device", "gpu"), ("--device", "hardware:sm90")])
def test_bad_arch_or_device_is_a_usage_error(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*CASE_ARGS, *argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err or "knows auto, hardware, virtual, compile and virtual:<arch>" in err


def test_device_defaults_to_pytests_auto() -> None:
    """--tile-device's default (the ini key tile_device's) is auto: bisect judges where pytest would."""
    assert str(parse(*CASE_ARGS).device) == "auto"
    assert str(parse(*CASE_ARGS, "--device", "virtual:sm100").device) == "virtual:sm100"
    assert parse(*CASE_ARGS, "--arch", "SM120").arch == "sm120"


def test_main_prints_the_table_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judge = FakeJudge({FINALIZE: [(0, FAIL), (13, FIXED)]})
    out = tmp_path / "out" / "bisect.json"
    args = parse(*CASE_ARGS, "--fusion", "finalize", "--releases", ",".join(RELEASES), "--json", str(out))
    assert main(args, judge) == 0
    printed = capsys.readouterr().out
    assert "changed between 0.6.12 and 0.6.13:" in printed
    assert f"  {FINALIZE}: initialize: Error Internal, smem 102,400 -> pass, smem 98,304" in printed
    assert "| 0.6.12 | initialize: Error Internal, smem 102,400 |" in printed
    data = json.loads(out.read_text())
    assert data["changes"] == [["0.6.12", "0.6.13"]]
    assert data["judged"]["0.6.13"][0]["stage"] == "pass"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_a_pass_whose_kernel_did_not_run_is_unrun_in_the_table_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A virtual device's pass (judged through launch) is ``unrun`` wherever bisect shows it; a
    GPU's pass (judged through numerics) is ``pass``."""
    virtual = Verdict(None, Stage.LAUNCH, "virtual (sm120 profile)", smem_requested=98304, smem_limit=101376)
    gpu = Verdict(None, Stage.NUMERICS, "hardware (NVIDIA RTX PRO 6000, CC 12.0)", smem_requested=98304)
    assert (outcome_of(virtual, True, "0.6.13").stage, outcome_of(gpu, True, "0.6.13").stage) == (
        "unrun",
        "pass",
    )
    judge = FakeJudge({FINALIZE: [(0, FAIL), (13, outcome_of(virtual, True, ""))]})
    out = tmp_path / "bisect.json"
    args = parse(*CASE_ARGS, "--fusion", "finalize", "--releases", ",".join(RELEASES), "--json", str(out))
    assert main(args, judge) == 0
    printed = capsys.readouterr().out
    assert "| 0.6.13 | unrun, smem 98,304 |" in printed and "| pass" not in printed
    assert f"  {FINALIZE}: initialize: Error Internal, smem 102,400 -> unrun, smem 98,304" in printed
    assert "unrun: passed every stage the device judges; the kernel did not run (not a pass)" in printed
    assert json.loads(out.read_text())["judged"]["0.6.13"][0]["stage"] == "unrun"


def test_main_reports_bad_input_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(*CASE_ARGS, "--releases", "0.6.0", "--from", "0.5.3")
    assert main(args, FakeJudge({})) == 2
    assert "error: --releases lists the releases itself" in capsys.readouterr().err


def test_the_flashinfer_judge_names_the_release_and_never_guesses(
    tmp_path: Path, cases: list[MoeCase]
) -> None:
    """The real judge against fake wheels: one the harness cannot instantiate (no compile), and
    one it cannot compile against (nvcc fails in the harness's own file, in seconds). Both are
    'not judgeable' with the reason and the release, never a verdict on the tile."""
    from helpers.wheels import KEPT, NV, make_wheel

    from pytest_tileconform.flashinfer.commands.bisect import flashinfer_judge
    from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO
    from pytest_tileconform.flashinfer.sources import LAUNCHER_INL, FlashInferSourcesError, find_cuda_home

    old = f"#define {MACRO}({', '.join(p for p in HARNESS_MACRO_PARAMS if p != 'SWAP_AB_')})\n"
    wheels = {
        "0.5.0": make_wheel(tmp_path, "0.5.0", files={**KEPT, f"{NV}/{LAUNCHER_INL}": old}),
        "0.6.4": make_wheel(tmp_path, "0.6.4"),
    }
    judge = flashinfer_judge(tmp_path / "cache", DeviceChoice("compile"), 1, None, 60.0, wheels)
    refused = judge("0.5.0", cases[:1])
    assert [o.stage for o in refused] == [NOT_JUDGEABLE]
    assert "takes 16 parameters without SWAP_AB_" in refused[0].detail
    assert refused[0].release.startswith("flashinfer-python 0.5.0 (wheel sha256:")
    try:
        find_cuda_home()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    (broken,) = judge("0.6.4", cases[:1])
    assert broken.stage == NOT_JUDGEABLE, broken
    assert "the tool cannot build sm120 nvfp4 x nvfp4 -> bf16 none against FlashInfer 0.6.4" in broken.detail
    assert broken.release.startswith("flashinfer-python 0.6.4 (wheel sha256:")


def test_pdl_and_the_hardware_stages_are_options() -> None:
    """--pdl is a case axis like --swap-ab; --graph-replays, --repeats and --sequence take
    pytest's defaults and refusals."""
    args = parse(*CASE_ARGS, "--pdl", "true", "--pdl", "false", "--sequence", "1000", "--repeats", "0")
    assert [c.id.rsplit("-", 1)[-1] for c in build_cases(args)] == ["pdl", "nopdl"]
    assert (args.graph_replays, args.repeats, args.sequence) == (8, 0, 1000)
    assert [c.axes.pdl for c in build_cases(parse(*CASE_ARGS))] == [None]
    with pytest.raises(BisectError, match="--pdl 'maybe': expected true or false"):
        build_cases(parse(*CASE_ARGS, "--pdl", "maybe"))
    with pytest.raises(SystemExit):
        parse(*CASE_ARGS, "--sequence", "-1")


def test_a_gpu_pass_says_which_stages_it_went_through() -> None:
    """A pass on the GPU shows the last stage it was judged through and the sequence stage's
    runs, so a table says whether the race-finding stages ran; two passes through different
    stages still compare equal (only stage, status and shared memory are compared)."""
    seq = Verdict(None, Stage.SEQUENCE, "hardware (NVIDIA H200, CC 9.0)", smem_requested=98304)
    seq.extra["sequence"] = {"runs": 5000}
    plain = Verdict(None, Stage.REPEAT, "hardware (NVIDIA H200, CC 9.0)", smem_requested=98304)
    through_seq, through_repeat = outcome_of(seq, True, "0.6.4"), outcome_of(plain, True, "0.6.4")
    assert through_seq.cell() == "pass through sequence (5,000 runs), smem 98,304"
    assert through_repeat.cell() == "pass through repeat, smem 98,304"
    assert through_seq.key == through_repeat.key
