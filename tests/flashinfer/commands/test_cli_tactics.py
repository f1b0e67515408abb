"""tileconform tactics: FlashInfer's MoERunner tactic ids -> configuration and verdict.

The probe outputs replayed here are FlashInfer 0.7.4's own (``data/tactics-sm90-sm100-flashinfer-
0.7.4.jsonl`` and ``data/tactics-sm120-flashinfer-0.7.4.jsonl``: the tactics probe run for those
SMs, ``offered_tactics(find_sources(), [arch], cache)``). ``data/tactics-flashinfer-0.7.4.key.json``
says which sources they are current for: :func:`numbering_digest` of FlashInfer's heuristic,
getConfigs/getTactics, config enums, dispatch, binding and ``MoERunner`` plus the probe's source.
When a test below says the key is stale, run the probe again for sm90, sm100 and sm120 (the slow
tests do), replace the two files with its output and write the new digest into the key.
"""

from __future__ import annotations

import ast
import enum
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import matrix_reports, report
from helpers.fake_backend import TEST_KINDS
from helpers.paths import DATA

from pytest_tileconform.commands.cli import main
from pytest_tileconform.dtypes import label_dtypes, tile_k_elements
from pytest_tileconform.flashinfer.axes import moe_cases
from pytest_tileconform.flashinfer.sources import FlashInferSources
from pytest_tileconform.flashinfer.tactics.autotuner_lines import LineError, mentions
from pytest_tileconform.flashinfer.tactics.offered import numbering_digest, parse
from pytest_tileconform.matrix.load import load_matrix

REPO = DATA.parent.parent
SM90_SM100 = DATA / "tactics-sm90-sm100-flashinfer-0.7.4.jsonl"
SM120 = DATA / "tactics-sm120-flashinfer-0.7.4.jsonl"
KEY = DATA / "tactics-flashinfer-0.7.4.key.json"
RECORDED = {"sm90": SM90_SM100, "sm100": SM90_SM100, "sm120": SM120}
#: the command loads every shipped matrix on each run: parsed once a session here
pytestmark = pytest.mark.usefixtures("remembered_matrices")
SM120_RESULTS = report("sm120-virtual")


@pytest.fixture(scope="module")
def flashinfer_074(generator_sources: FlashInferSources) -> FlashInferSources:
    if generator_sources.version != "0.7.4":
        pytest.skip(
            f"the recorded probe outputs are FlashInfer 0.7.4's, installed is {generator_sources.version}"
        )
    return generator_sources


def _raw(arch: str) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in RECORDED[arch].read_text().splitlines() if f'"sm":{arch[2:]},' in line
    ]


def _runners(arch: str) -> list[str]:
    return sorted({row["runner"] for row in _raw(arch)})


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    if "--matrix" not in argv:  # the expectations of the smallest shipped matrix: loaded fast
        argv = (*argv, "--matrix", "smoke-sm90")
    assert main(["tactics", *argv, "--json"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


def _expected_rows(arch: str, runner: str) -> list[dict[str, Any]]:
    """What the binding's numbering gives, read off the probe's lines without the command: one
    runner's GEMM 1 list, then its GEMM 2 list; an id is the position in that concatenation."""
    mine = [row for row in _raw(arch) if row["runner"] == runner]
    ordered = [row for row in mine if row["gemm"] == 1] + [row for row in mine if row["gemm"] == 2]
    expected = []
    for position, row in enumerate(ordered):
        tile = None
        if row["tma_ws"]:
            if row.get("instantiation"):
                tile = "x".join(map(str, row["instantiation"]["tile"]))
            else:
                m, n, k = row["tile_bytes"]
                act, weight, _ = label_dtypes(runner)
                if not (arch == "sm90" and act != weight):  # the mixed dispatch takes K as it is
                    k = tile_k_elements(k, act)
                tile = f"{m}x{n}x{k}"
        expected.append(
            {
                "tactic": position,
                "gemm": row["gemm"],
                "tile": tile,
                "cluster": "x".join(map(str, row["cluster"])) if row.get("cluster") else None,
                "dynamic_cluster": "x".join(map(str, row["dynamic_cluster"]))
                if row.get("dynamic_cluster")
                else None,
                "fusion": row.get("fusion") if row["tma_ws"] else None,
                "swap_ab": row.get("swap_ab") if row["tma_ws"] else None,
                "dispatch": row["dispatch"],
            }
        )
    return expected


@pytest.mark.parametrize("arch", ["sm90", "sm100", "sm120"])
@pytest.mark.parametrize("gemm", [1, 2])
def test_every_id_maps_to_flashinfers_config(
    arch: str, gemm: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every id FlashInfer 0.7.4 offers for the arch, every runner, one GEMM at a time."""
    checked = 0
    for runner in _runners(arch):
        rows = _json(
            capsys, "--arch", arch, "--dtype", runner, "--gemm", str(gemm), "--tactics", str(RECORDED[arch])
        )
        keys = ("tactic", "gemm", "tile", "cluster", "dynamic_cluster", "fusion", "swap_ab", "dispatch")
        got = [{k: row[k] for k in keys} for row in rows]
        want = [row for row in _expected_rows(arch, runner) if row["gemm"] == gemm]
        assert got == want, runner
        assert all(row["runner"] == runner and row["arch"] == arch for row in rows)
        checked += len(rows)
    assert checked == sum(1 for row in _raw(arch) if row["gemm"] == gemm)


def _moe_runner_get_valid_tactics(core: Path) -> Any:
    """FlashInfer's own ``MoERunner.get_valid_tactics`` (flashinfer/fused_moe/core.py), compiled
    from its source: the class is built inside the JIT module loader, which needs a GPU."""
    tree = ast.parse(core.read_text())
    runner = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "MoERunner")
    function = next(
        n for n in runner.body if isinstance(n, ast.FunctionDef) and n.name == "get_valid_tactics"
    )
    ActivationType = enum.Enum("ActivationType", "Swiglu ClampedRelu2")  # what the function reads of it
    namespace: dict[str, Any] = {
        "ActivationType": ActivationType,
        "logger": logging.getLogger("flashinfer-test"),
    }
    exec(compile(ast.Module(body=[function], type_ignores=[]), str(core), "exec"), namespace)
    return namespace["get_valid_tactics"], ActivationType


class _Binding:
    """The binding's answers the Python side asks for (counts; every tactic fits the device)."""

    def __init__(self, gemm1: int, gemm2: int) -> None:
        self.counts = (gemm1, gemm2)

    def get_gemm1_tactic_count(self) -> int:
        return self.counts[0]

    def get_gemm2_tactic_count(self) -> int:
        return self.counts[1]

    def get_tactic_occupancy(self, _tactic: int) -> int:
        return 1


@pytest.mark.parametrize("arch", ["sm90", "sm100", "sm120"])
def test_flashinfers_python_offers_the_same_ids(
    arch: str, flashinfer_074: FlashInferSources, capsys: pytest.CaptureFixture[str]
) -> None:
    """What MoERunner.get_valid_tactics offers the autotuner for trtllm::fused_moe::gemm1 and gemm2
    (the ids a log line or cache entry carries) are the command's GEMM 1 and GEMM 2 ids."""
    core = flashinfer_074.root.parent / "fused_moe" / "core.py"
    if not core.is_file():
        pytest.skip(f"no {core}: FlashInfer's Python package is not beside its sources")
    get_valid_tactics, activation = _moe_runner_get_valid_tactics(core)
    for runner in _runners(arch):
        rows = _json(capsys, "--arch", arch, "--dtype", runner, "--tactics", str(RECORDED[arch]))
        ids = {gemm: [r["tactic"] for r in rows if r["gemm"] == gemm] for gemm in (1, 2)}
        for stage in (1, 2):
            fake = type("MoERunner", (), {})()
            fake.fused_moe_runner = _Binding(len(ids[1]), len(ids[2]))
            fake.gemm_idx_for_tuning = stage
            fake.activation_type = activation.Swiglu
            fake.use_w4_group_scaling = False
            assert get_valid_tactics(fake, [], None) == ids[stage], (runner, stage)


def test_committed_outputs_are_current(flashinfer_074: FlashInferSources) -> None:
    key = json.loads(KEY.read_text())
    assert key["flashinfer"] == flashinfer_074.version
    assert numbering_digest(flashinfer_074) == key["numbering_digest"], (
        "FlashInfer's heuristic, dispatch, binding or MoERunner, or the probe, changed since the "
        "probe outputs in tests/data were recorded: record them again (module docstring)"
    )


@pytest.mark.slow
def test_probe_reproduces_sm90_and_sm100(flashinfer_074: FlashInferSources) -> None:
    """Builds the tactics probe (about 65 s and 2 GB once; cached in the suite's build cache)."""
    from pytest_tileconform.compile.cache import default_cache_dir
    from pytest_tileconform.flashinfer.tactics.offered import offered_tactics

    lines = offered_tactics(flashinfer_074, ["sm90", "sm100"], default_cache_dir())
    assert lines == SM90_SM100.read_text().splitlines()


# -- pasted autotuner lines ----------------------------------------------------------------------
SKIPPING = (
    "(Worker_PP0 pid=38385) 2025-11-11 06:41:27,319 - WARNING - autotuner.py:485 - flashinfer.jit: "
    "[Autotuner]: Skipping tactic <flashinfer.fused_moe.core.get_cutlass_fused_moe_module.<locals>."
    "MoERunner object at 0x7c70ccce8350> 15, due to failure while profiling: [TensorRT-LLM][ERROR] "
    "Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. Error: Error Internal"
)
CACHE_ENTRY = (
    "\"('trtllm::fused_moe::gemm2', 'MoERunner', ((8, 7168), (64, 4096, 3584)), (torch.uint8, "
    "torch.int64, torch.bfloat16, 8, 1, 1, 1, False, False, False, False, False, False, True, 3, "
    'False, True))": ["MoERunner", 27, "hot_l2"],'
)
CHOSEN = (
    "[Autotuner]: profiling chosen runner: <flashinfer.fused_moe.core.get_cutlass_fused_moe_module."
    "<locals>.MoERunner object at 0x7f00aa> 3 for ProfilingCacheKey(custom_op='trtllm::fused_moe::gemm1', "
    "runner_class_name='MoERunner', runner_hash=1, nearest_profile=((8, 7168),), extras=())"
)


@pytest.mark.parametrize(
    ("text", "gemm", "ids"),
    [
        (SKIPPING, None, (15,)),
        (CACHE_ENTRY, 2, (27,)),
        ('["MoERunner", 17]', None, (17,)),
        (CHOSEN, 1, (3,)),
        ('"trtllm::fused_moe::gemm1::MoERunner": [3, 11]', 1, (3, 11)),
        (" 17\n", None, (17,)),
        ('["MoERunner", -1]', None, (-1,)),
    ],
)
def test_autotuner_lines(text: str, gemm: int | None, ids: tuple[int, ...]) -> None:
    (found,) = mentions(text)
    assert (found.gemm, found.ids) == (gemm, ids)


def test_a_cache_entry_says_use_fused_finalize(capsys: pytest.CaptureFixture[str]) -> None:
    assert mentions(CACHE_ENTRY)[0].fused_finalize is True
    plain = CACHE_ENTRY.replace('False, True))"', 'False, False))"')
    assert mentions(plain)[0].fused_finalize is False and mentions(SKIPPING)[0].fused_finalize is None
    argv = [
        "tactics",
        "--arch",
        "sm120",
        "--dtype",
        "nvfp4-bf16",
        "--tactics",
        str(SM120),
        "--explain",
        plain,
    ]
    assert main(argv) == 0
    assert "line 1 was tuned with use_fused_finalize=False: its GEMM 2 ids are numbered as --no-fused" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--no-fused-finalize"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_pasted_cache_file_names_every_entry() -> None:
    text = "{\n" + CACHE_ENTRY + "\n" + CACHE_ENTRY.replace("gemm2", "gemm1").replace("27", "4") + "\n}"
    assert [(m.line, m.gemm, m.ids) for m in mentions(text)] == [(2, 2, (27,)), (3, 1, (4,))]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("no tactic here", "no MoERunner tactic in the pasted text"),
        ("", "(empty)"),
        ('fused_moe::gemm1 fused_moe::gemm2 ["MoERunner", 3]', "names both fused_moe::gemm1 and gemm2"),
    ],
)
def test_lines_naming_no_tactic(text: str, said: str) -> None:
    with pytest.raises(LineError, match=said.replace("(", r"\(").replace(")", r"\)")):
        mentions(text)


def _matrix_expectation(case_id: str) -> str:
    matrix = load_matrix(REPO / "matrices" / "sm120-flashinfer.yaml", TEST_KINDS)
    case = next(c for c in matrix.cases if c.id == case_id)
    source = f", {case.expectation.source}" if case.expectation and case.expectation.source else ""
    return f"{case.expected} [sm120-flashinfer{source}]"


def test_explain_a_cache_entry(capsys: pytest.CaptureFixture[str]) -> None:
    """GEMM 2's id 27 of the NVFP4 -> bf16 runner: the finalize tile the virtual sm120 device fails."""
    argv = [
        "--arch",
        "sm120",
        "--dtype",
        "nvfp4-bf16",
        "--tactics",
        str(SM120),
        "--matrix",
        "sm120-flashinfer",
    ]
    (row,) = _json(capsys, *argv, "--explain", CACHE_ENTRY, str(SM120_RESULTS))
    assert (row["gemm"], row["tactic"], row["tile"], row["fusion"], row["swap_ab"]) == (
        2,
        27,
        "128x256x128",
        "finalize",
        False,
    )
    assert row["expected"] == _matrix_expectation("sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize")
    assert row["observed"] == "initialize [virtual sm120]"
    assert main(["tactics", *argv, "--explain", CACHE_ENTRY]) == 0
    out = capsys.readouterr().out
    assert "## sm120 nvfp4-bf16: 27 (GEMM 1: 0-15, GEMM 2: 16-47)" in out
    assert (
        "| 27 | 2 | 128x256x128 (128x256x64B) | 1x1x1 | - | auto / auto | finalize | false | accepted |"
        in out
    )


def test_a_virtual_pass_says_how_far_it_was_judged(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--arch", "sm120", "--dtype", "nvfp4-bf16", "--tactics", str(SM120), "--explain", "17"]
    (row,) = _json(capsys, *argv, str(SM120_RESULTS))
    assert row["tile"] == "128x128x128" and row["observed"] == "unrun (through launch) [virtual sm120]"
    assert main(["tactics", *argv]) == 0  # every shipped matrix: sm120-flashinfer among them
    assert "pass [sm120-flashinfer]" in capsys.readouterr().out


def test_a_mixed_input_tactic_names_its_kernel_and_the_h200s_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """W4A8 tactic 0 is the Pingpong 64x16x128 kernel (K as the mixed dispatch takes it), judged
    on the H200 by the c1x1x1 Pingpong slice; that slice does not judge its 2x1x1 neighbour.
    W4A16 MXFP4 tactic 44, which FlashInfer offers, asks for more shared memory than an H200
    has: the matrix expects, and the H200 observed, a failure at initialize."""
    results = matrix_reports("sm90-mixed-flashinfer.yaml")
    c1_pingpong = str(report("w4a8-c1-pingpong-hardware"))
    argv = ["--arch", "sm90", "--dtype", "fp8_e4m3xint4-bf16", "--tactics", str(SM90_SM100)]
    argv += ["--matrix", "sm90-mixed-flashinfer"]
    (row,) = _json(capsys, *argv, "--explain", "0", c1_pingpong)
    assert (row["tile"], row["cluster"], row["mainloop_schedule"]) == ("64x16x128", "1x1x1", "pingpong")
    assert row["expected"] == "pass [sm90-mixed-flashinfer]"
    assert row["observed"] == "pass [hardware NVIDIA H200]"
    (row,) = _json(capsys, *argv, "--explain", "1", c1_pingpong)
    assert (row["cluster"], row["observed"]) == ("2x1x1", "not judged")
    argv[argv.index("fp8_e4m3xint4-bf16")] = "bf16xmxfp4-bf16"
    (row,) = _json(capsys, *argv, "--explain", "44", *map(str, results))
    assert (row["tile"], row["cluster"], row["mainloop_schedule"]) == ("64x128x512", "1x1x1", "pingpong")
    assert row["expected"].startswith("initialize") and row["observed"].startswith("initialize")


def test_default_id_and_wrong_gemm(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["tactics", "--arch", "sm120", "--dtype", "nvfp4-bf16", "--tactics", str(SM120)]
    rows = _json(capsys, *base[1:], "--explain", '"trtllm::fused_moe::gemm2::MoERunner": [-1]')
    assert [(r["gemm"], r["tactic"]) for r in rows] == [(2, 16)]  # setRunnerProfiles' GEMM 2 default
    assert main([*base, "--explain", '"trtllm::fused_moe::gemm1::MoERunner": [27]']) == 2
    err = capsys.readouterr().err
    assert "27 is a GEMM 2 id, but the line names gemm1 (GEMM 1: 0-15, GEMM 2: 16-47)" in err
    assert main([*base, "--explain", "48"]) == 2
    assert "48 is not an id of this runner" in capsys.readouterr().err


def test_bad_text_fails_before_the_probe(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tactics", "--arch", "sm120", "--dtype", "nvfp4", "--flashinfer-sources", "/nonexistent"]
    assert main([*argv, "--explain", "nothing"]) == 2
    assert "--explain: no MoERunner tactic" in capsys.readouterr().err


def test_dtype_selection(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--arch", "sm120", "--tactics", str(SM120), "--explain", "0"]
    assert {r["runner"] for r in _json(capsys, *base, "--dtype", "nvfp4")} == {"nvfp4-bf16", "nvfp4-fp16"}
    assert {r["runner"] for r in _json(capsys, *base, "--dtype", "fp8")} == {"fp8_e4m3-bf16", "fp8_e4m3-fp16"}
    assert main(["tactics", *base, "--dtype", "int4"]) == 2
    assert "--dtype 'int4': unknown activation dtype 'int4'; expected one of bf16" in capsys.readouterr().err


def test_sm80_style_tactics_are_named_not_judged(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "--arch", "sm120", "--dtype", "bf16", "--tactics", str(SM120))
    assert len(rows) == 18 and not any(r["tma_ws"] for r in rows)
    assert rows[0]["sm80_tile_config"] == 4 and rows[0]["expected"].startswith("not judged (SM80-style")


def test_where_flashinfer_comes_from(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tactics", "--arch", "sm120", "--dtype", "nvfp4"]
    assert main([*argv, "--flashinfer", "0.6.0", "--flashinfer-sources", "/x"]) == 2
    assert "--flashinfer and --flashinfer-sources both" in capsys.readouterr().err
    assert main([*argv, "--flashinfer", "/nonexistent/flashinfer_python-0.6.0-py3-none-any.whl"]) == 3
    assert (
        "wheel /nonexistent/flashinfer_python-0.6.0-py3-none-any.whl does not exist"
        in capsys.readouterr().err
    )
    assert main(["tactics", "--arch", "sm90", "--dtype", "bf16", "--tactics", str(SM120)]) == 2
    assert f"no tactic for sm90 in {SM120}" in capsys.readouterr().err


def test_without_fused_finalize_gemm2_offers_gemm1s_list(capsys: pytest.CaptureFixture[str]) -> None:
    """use_fused_finalize=False: mayHaveFinalizeFused() is false, GEMM 2 gets getConfigs(false),
    GEMM 1's list, numbered after it; -1 is then GEMM 1's first config as GEMM 2's default."""
    argv = ["--arch", "sm120", "--dtype", "nvfp4-bf16", "--tactics", str(SM120)]
    fused = _json(capsys, *argv)
    plain = _json(capsys, *argv, "--no-fused-finalize")
    first = [r for r in fused if r["gemm"] == 1]
    assert [r for r in plain if r["gemm"] == 1] == first
    second = [r for r in plain if r["gemm"] == 2]
    assert [r["tactic"] for r in second] == list(range(16, 32))
    assert [(r["tile"], r["fusion"], r["swap_ab"]) for r in second] == [
        (r["tile"], r["fusion"], r["swap_ab"]) for r in first
    ]
    (row,) = _json(
        capsys, *argv, "--no-fused-finalize", "--explain", '"trtllm::fused_moe::gemm2::MoERunner": [27]'
    )
    assert (row["tactic"], row["tile"], row["fusion"]) == (27, "128x256x128", "none")


# -- the whole space ---------------------------------------------------------------------------
WHOLE_SPACE = {
    "sm90": ("sm90.yaml", "sm90-mixed-flashinfer.yaml"),
    "sm100": ("sm100-flashinfer.yaml",),
    "sm120": ("sm120-flashinfer.yaml",),
}


@pytest.mark.parametrize("arch", sorted(WHOLE_SPACE))
def test_every_kernel_flashinfer_can_pick_is_a_shipped_case(arch: str) -> None:
    """Each TMA warp-specialized tactic FlashInfer 0.7.4 offers for the arch and its dispatch
    takes, of every runner and both GEMMs, is a case of the arch's generated matrix: ``tactics``
    names a verdict for it, ``drift`` finds it judged. Refused tactics select no kernel; SM80-style
    tactics are another launcher. SM90's mixed-input tactics go through their own dispatch to the
    cases of sm90-mixed-flashinfer.yaml."""
    from pytest_tileconform.flashinfer.tactics.offered import case_key, tactic_key

    cases = [
        c
        for name in WHOLE_SPACE[arch]
        for c in moe_cases(load_matrix(REPO / "matrices" / name, TEST_KINDS).cases)
    ]
    keys = {
        case_key(
            arch,
            c.dtype_label,
            c.tile,
            c.axes.cluster,
            c.axes.swap_ab,
            c.axes.fusion,
            c.axes.epilogue,
            c.axes.dynamic_cluster,
            c.axes.mainloop,
        )
        for c in cases
    }
    offered = [t for t in parse(RECORDED[arch].read_text().splitlines()) if f"sm{t.sm}" == arch]
    picked = [t for t in offered if t.tma_ws and t.dispatch == "accepted"]
    assert picked
    missing = [(t.runner, t.tactic) for t in picked if tactic_key(t) not in keys]
    assert missing == []
    # and nothing in the matrix is a kernel FlashInfer's generator does not build
    assert {t.runner for t in picked} <= {c.dtype_label for c in cases}


def test_a_tactic_the_dispatch_refuses_is_named_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """MXFP8 x MXFP8 runs as the FP8 runner: FlashInfer offers it the FP8 tiles, and its MX
    dispatch takes only the block-scaled ones; the others select no kernel for any problem."""
    from pytest_tileconform.flashinfer.commands.tactics import REJECTED

    rows = _json(
        capsys, "--arch", "sm100", "--dtype", "mxfp8-bf16", "--matrix", "sm100-flashinfer",
        "--tactics", str(SM90_SM100),
    )  # fmt: skip
    refused = [r for r in rows if r["dispatch"] == "rejected"]
    taken = [r for r in rows if r["dispatch"] == "accepted"]
    assert refused and taken
    assert {r["expected"] for r in refused} == {REJECTED}
    assert all(r["expected"].startswith("pass [sm100-flashinfer") for r in taken)
    assert {r["tile"] for r in taken} == {"128x64x128", "128x128x128", "128x256x128"}


def test_clamped_relu2_runs_the_activation_fusion_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """Under ClampedRelu2 a bf16 or MXFP8 GEMM 1 tactic of SM100 runs its tile's ACTIVATION
    kernel (FlashInfer's isActivationFusionProfileSupported: TMA epilogue, no swap_ab, CTA
    128 x 64|128|256 x 128 bytes, cluster 1x1x1 or 2x1x1), and each is one the shipped matrix
    builds and the recorded virtual run judged; the binding refuses the others. GEMM 2 and
    the fp8 runner select what they select without it."""
    activation = report("sm100-activation-virtual")
    base = ["--arch", "sm100", "--tactics", str(SM90_SM100), "--matrix", "sm100-flashinfer"]
    for runner in ("bf16", "mxfp8-bf16", "mxfp8-fp16"):
        argv = [*base, "--dtype", runner, "--gemm", "1"]
        plain = _json(capsys, *argv)
        fused = _json(capsys, *argv, "--clamped-relu2", str(activation))
        assert [r["tactic"] for r in fused] == [r["tactic"] for r in plain]
        picked = [r for r in fused if r["dispatch"] == "accepted"]
        assert len(picked) == 21 and all(r["fusion"] == "activation" for r in picked)
        for r in picked:
            m, n, k = map(int, r["tile_bytes"].split("x"))
            assert (m, k, n in (64, 128, 256)) == (128, 128, True)
            assert r["cluster"] in ("1x1x1", "2x1x1") and r["epilogue_schedule"] == "tma"
            assert not r["swap_ab"]
            assert r["expected"] == "pass [sm100-flashinfer]"
            assert r["observed"] == "unrun (through launch) [virtual sm100]"
        refused = [r for r in fused if r["tma_ws"] and r["dispatch"] != "accepted"]
        assert refused
        assert all(r["expected"].startswith("fails: FlashInfer's binding refuses") for r in refused)
        assert len(picked) + len(refused) == len([r for r in plain if r["tma_ws"]])
        gemm2 = [*base, "--dtype", runner, "--gemm", "2"]
        assert _json(capsys, *gemm2, "--clamped-relu2") == _json(capsys, *gemm2)
    fp8 = [*base, "--dtype", "fp8_e4m3-bf16", "--gemm", "1"]
    assert _json(capsys, *fp8, "--clamped-relu2") == _json(capsys, *fp8)


def test_clamped_relu2_default_is_the_first_tactic_with_an_activation_kernel() -> None:
    """-1 under ClampedRelu2 is FlashInfer's defaultActivationFusionProfile: GEMM 1's first
    tactic that has an activation-fusion kernel, not necessarily tactic 0."""
    from dataclasses import replace

    from pytest_tileconform.flashinfer.commands.tactics import resolve
    from pytest_tileconform.flashinfer.tactics.offered import runner_tactics, with_fused_activation

    listed = runner_tactics(parse(SM90_SM100.read_text().splitlines()), 100, "bf16")
    swapped = [replace(listed[0], swap_ab=True), *listed[1:]]  # tactic 0 now has none
    (said,) = mentions('"trtllm::fused_moe::gemm1::MoERunner": [-1]')
    ((_, plain),) = resolve(said, swapped)[0]
    ((_, fused),) = resolve(said, with_fused_activation(swapped))[0]
    assert plain.tactic == 0 and fused.tactic > 0 and fused.fusion == "activation"
