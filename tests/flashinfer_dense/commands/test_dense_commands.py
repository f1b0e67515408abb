"""``tileconform tactics``, ``drift`` and ``export-blocklist`` with ``--dense``: the dense backend
joins the MoE backend's commands through the command hook, and its tactic ids are FlashInfer's.

The ids are checked against FlashInfer 0.7.4's own code, not against a list typed here
(:mod:`helpers.dense_flashinfer`): each runner's ``getConfigs()`` compiled by g++ and run, and
FlashInfer's Python choosing the runner per architecture and answering ``get_valid_tactics``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.dense_flashinfer import compiled_configs, flashinfer_runners
from helpers.evidence import matrix_reports

from pytest_tileconform.archs import KNOWN, arch_number
from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.sources import FlashInferSources, find_sources
from pytest_tileconform.flashinfer_dense.offered import Offered, read_offered

GPU = "NVIDIA GeForce RTX 5090"
#: --dtype is required (the MoE command's option): every operand type a dense runner may take
OPERANDS = ("nvfp4", "mxfp8", "fp8_e4m3", "bf16")


@pytest.fixture(scope="module")
def installed() -> tuple[FlashInferSources, Offered]:
    sources = find_sources()
    return sources, read_offered(sources)


@pytest.fixture(scope="module")
def theirs(
    compiled: tuple[dict[str, Any], dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> dict[int, list[tuple[str, str | None, list[int]]]]:
    """What FlashInfer's own Python offers on each architecture, its counts from ``compiled``."""
    counts = {module: len(configs) for module, configs in compiled[0].items()}
    return flashinfer_runners([arch_number(a) for a in KNOWN], counts, tmp_path_factory.mktemp("flashinfer"))


@pytest.fixture(scope="module")
def compiled(
    installed: tuple[FlashInferSources, Offered], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], dict[str, Any]]:
    if shutil.which("g++") is None:
        pytest.skip("g++ evaluates FlashInfer's getConfigs()")
    sources, offered = installed
    return compiled_configs(sources, list(offered.families), tmp_path_factory.mktemp("get_configs"))


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["tactics", "--dense", "--json", *argv]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


def _every_runner(capsys: pytest.CaptureFixture[str], arch: str) -> list[dict[str, Any]]:
    """The rows of every dense runner of ``arch``; an operand type without one is refused (exit 2)."""
    rows = []
    for operand in OPERANDS:
        # expectations from one small matrix: the ids, not the verdicts, are under test here
        argv = ["tactics", "--dense", "--json", "--arch", arch, "--dtype", operand, "--matrix", "gemm-sm120"]
        status = main(argv)
        out, err = capsys.readouterr()
        if status == 2:
            assert f"no dense CUTLASS runner of it on {arch}" in err
            continue
        assert status == 0, err
        rows += json.loads(out)
    return rows


def test_each_tactic_id_is_the_configuration_flashinfers_get_configs_returns_at_that_index(
    compiled: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    run, read = compiled
    assert set(run) == set(read) and run
    for module, configs in run.items():
        assert read[module] == configs, module


@pytest.mark.parametrize("arch", KNOWN)
def test_tactics_maps_the_ids_flashinfers_own_python_offers_on_every_architecture(
    arch: str,
    theirs: dict[int, list[tuple[str, str | None, list[int]]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a runner that offers only its default (-1: SM12x fp8's groupwise kernel) has no tactic list
    expected = {(cls, module): ids for cls, module, ids in theirs[arch_number(arch)] if ids != [-1]}
    rows = _every_runner(capsys, arch)
    first = {r["module"]: r["dtypes"] for r in reversed(rows)}  # each module's first output type
    listed: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        if row["dtypes"] == first[row["module"]]:
            listed.setdefault((row["runner"], row["module"]), []).append(row["tactic"])
    assert listed == expected
    # every output type lists the same ids
    for (_cls, module), ids in expected.items():
        for dtypes in {r["dtypes"] for r in rows if r["module"] == module}:
            assert [r["tactic"] for r in rows if r["module"] == module and r["dtypes"] == dtypes] == ids


def test_tactics_no_matrix_names_are_mapped_and_unjudged(capsys: pytest.CaptureFixture[str]) -> None:
    # the expectations of one matrix of another arch: no sm103 tactic is named
    rows = _json(capsys, "--arch", "sm103", "--dtype", "nvfp4-bf16", "--matrix", "gemm-sm100-fp4")
    assert [r["tactic"] for r in rows] == list(range(63))  # 7 tiles x 9 cluster shapes
    assert {r["expected"] for r in rows} == {"unjudged"}
    assert {r["module"] for r in rows} == {"fp4_gemm_cutlass_sm103"}  # SM103 loads its own fp4 module


@pytest.mark.parametrize(
    ("arch", "act", "tactics", "module", "matrix", "dtypes"),
    [
        ("sm121", "mxfp8", 6, "mxfp8_gemm_cutlass_sm120", "gemm-sm121-mxfp8", {"mxfp8-bf16", "mxfp8-fp16"}),
        ("sm121", "nvfp4", 32, "fp4_gemm_cutlass_sm120", "gemm-sm121-fp4", {"nvfp4-bf16", "nvfp4-fp16"}),
        ("sm103", "nvfp4", 63, "fp4_gemm_cutlass_sm103", "gemm-sm103-fp4", {"nvfp4-bf16", "nvfp4-fp16"}),
        ("sm103", "mxfp8", 32, "mxfp8_gemm_cutlass", "gemm-sm103-mxfp8", {"mxfp8-bf16", "mxfp8-fp16"}),
        ("sm103", "fp8_e4m3", 30, "fp8_gemm_cutlass", "gemm-sm103-fp8", {"fp8_e4m3-bf16", "fp8_e4m3-fp16"}),
        ("sm103", "bf16", 25, "bf16_gemm_cutlass", "gemm-sm103-bf16", {"bf16"}),  # --dtype bf16: bf16 out
    ],
)
def test_the_shipped_matrices_of_an_arch_without_modules_of_its_own_name_every_tactic(
    capsys: pytest.CaptureFixture[str],
    arch: str,
    act: str,
    tactics: int,
    module: str,
    matrix: str,
    dtypes: set[str],
) -> None:
    """SM121 loads the SM120 modules (their generator's supported majors are [12]) and SM103 its
    own fp4 module and SM100's others ([10, 11]); each matrix names every id of its module once per
    output type, judged on the arch's own virtual profile."""
    rows = _json(capsys, "--arch", arch, "--dtype", act)
    assert {r["module"] for r in rows} == {module}
    assert {r["dtypes"] for r in rows} == dtypes
    assert sorted(r["tactic"] for r in rows) == sorted(len(dtypes) * list(range(tactics)))
    assert all(r["expected"].startswith(f"pass [{matrix}") for r in rows), {r["expected"] for r in rows}
    assert all(" x" not in r["expected"] for r in rows)


@pytest.mark.parametrize(("arch", "count"), [("sm121", 76), ("sm103", 325)])
def test_drift_flags_nothing_where_the_shipped_matrices_name_every_tactic(
    capsys: pytest.CaptureFixture[str], arch: str, count: int
) -> None:
    """Every dense tactic FlashInfer offers on SM121 (mxfp8 and fp4, both output types) and on
    SM103 (fp4 and mxfp8, fp8 x 2 and bf16 x 3 output types) is named by a shipped matrix: the
    strict drift passes."""
    assert main(["drift", "--dense", "--arch", arch, "--strict"]) == 0
    assert f"{count} dense tactic(s) x output type for {arch}: nothing flagged." in capsys.readouterr().out


def test_the_shipped_sm120_matrices_expect_their_tactics(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "--arch", "sm120", "--dtype", "mxfp8")
    assert {r["dtypes"] for r in rows} == {"mxfp8-bf16", "mxfp8-fp16"}
    # every tactic expected to pass by gemm-sm120.yaml (with the source of its expectation, once written)
    assert all(r["expected"].startswith("pass [gemm-sm120") for r in rows), {r["expected"] for r in rows}


@pytest.mark.parametrize(
    ("act", "tactics", "matrix"),
    [("nvfp4", 32, "gemm-sm100-fp4"), ("mxfp8", 32, "gemm-sm100-mxfp8"), ("fp8_e4m3", 30, "gemm-sm100-fp8")],
)
def test_the_shipped_sm100_matrices_name_every_tactic_once(
    capsys: pytest.CaptureFixture[str], act: str, tactics: int, matrix: str
) -> None:
    """Every id FlashInfer's SM100 runner enumerates (tile x cluster shape), for each output type
    the generator renders, is one case of its matrix: no id unjudged, none named twice."""
    rows = _json(capsys, "--arch", "sm100", "--dtype", act)
    assert {r["dtypes"] for r in rows} == {f"{act}-bf16", f"{act}-fp16"}
    assert sorted(r["tactic"] for r in rows) == sorted(2 * list(range(tactics)))
    assert all(r["expected"].startswith(f"pass [{matrix}") for r in rows), {r["expected"] for r in rows}
    assert all(" x" not in r["expected"] for r in rows)  # one case a tactic, not several
    assert {r["cluster"] for r in rows} > {"1x1x1"}


def test_drift_on_the_shipped_matrices_names_every_unjudged_tactic(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """As users run it: the installed command line. A row is flagged unjudged exactly where no
    shipped matrix names the tactic for that output type (``tactics``' expectation); SM120's mxfp8
    lists (both output types) and fp4 with bf16 output are shipped (gemm-sm120*.yaml)."""
    rows = [
        row for operand in ("nvfp4", "mxfp8") for row in _json(capsys, "--arch", "sm120", "--dtype", operand)
    ]
    unjudged = {(r["dtypes"], r["tactic"]) for r in rows if r["expected"] == "unjudged"}
    assert not {d for d, _ in unjudged} & {"mxfp8-bf16", "mxfp8-fp16", "nvfp4-bf16"}
    tileconform = (sys.executable, "-m", "pytest_tileconform")
    done = pytester.run(*tileconform, "drift", "--dense", "--arch", "sm120", "--strict")
    assert done.ret == (1 if unjudged else 0), done.stderr.str()
    section = ""
    flagged = set()
    for line in done.stdout.lines:
        if line.startswith("## "):
            section = line.split()[2].rstrip(":")
        elif "**offered, unjudged**" in line:
            flagged.add((section, int(line.split("|")[1])))
    assert flagged == unjudged
    summary = f"{len(rows)} dense tactic(s) x output type for sm120: "
    summary += f"{len(unjudged)} offered, unjudged." if unjudged else "nothing flagged."
    assert summary in done.stdout.str()
    results = [str(p) for p in matrix_reports("gemm-sm120.yaml")]
    judged = pytester.run(*tileconform, "drift", "--dense", "--arch", "sm120", "--dtype", "mxfp8", *results)
    assert judged.ret == 0
    assert "12 dense tactic(s) x output type for sm120: nothing flagged." in judged.stdout.str()
    assert "unrun (through launch) [virtual sm120]" in judged.stdout.str()
    none = pytester.run(*tileconform, "drift", "--dense", "--arch", "sm90", "--strict")
    assert none.ret == 0 and "no dense CUTLASS runner with a tactic list for sm90" in none.stdout.str()


def _failing_report(tmp_path: Path, failing: set[str]) -> Path:
    """The shipped SM120 mxfp8 virtual report, with ``failing`` cases turned into an initialize
    failure (a fixture: the real report has none)."""
    source = matrix_reports("gemm-sm120.yaml")[0]
    data = source.read_bytes()
    document = json.loads(gzip.decompress(data) if source.name.endswith(".gz") else data)
    for case in document["cases"]:
        if case["id"] in failing:
            case["outcome"] = "failed"
            case["verdict"].update(outcome="initialize", failed_stage="initialize", status="Error Internal")
    path = tmp_path / "sm120-dense.json"
    path.write_text(json.dumps(document))
    return path


def test_export_blocklist_blocks_a_failing_dense_tactic_under_flashinfers_key(
    installed: tuple[FlashInferSources, Offered], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = {
        "sm120-mxfp8-bf16-128x128x128-m256n256k512",
        "sm120-mxfp8-bf16-128x128x128-swapab-m256n256k512",
    }
    report = _failing_report(tmp_path, failing)
    out = tmp_path / "blocklist.json"
    argv = ["export-blocklist", "--dense", "--arch", "sm120", str(report), "-o", str(out)]
    assert main(argv) == 2  # virtual evidence alone is refused, as the MoE export refuses it
    assert "--accept-virtual" in capsys.readouterr().err
    assert main([*argv, "--accept-virtual", "--gpu", GPU]) == 0
    written = json.loads(out.read_text())
    family = installed[1].family("mxfp8_gemm_cutlass_sm120")
    ids = [t.index for t in family.tactics if t.cta == (128, 128, 128)]
    assert written["invalid_tactics"] == {"mxfp8_gemm::CutlassMxfp8GemmRunner": ids}
    assert written["_metadata"]["gpu"] == GPU
    meta = written["_metadata"]["tileconform"]
    assert meta["dtypes"] == "mxfp8-bf16"
    assert sorted(meta["blocked"][0]["case_ids"] + meta["blocked"][1]["case_ids"]) == sorted(failing)
    # the other four bf16 tactics passed only through launch: not blocked, listed as unrun
    assert sorted(t for u in meta["unrun"] for t in u["tactics"]) == [0, 1, 2, 3]


def test_export_blocklist_of_the_field_report_against_another_release_blocks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FlashInfer #3568's tactics failed against 0.6.17's list (6-9: 256x128x128 and 128x256x128);
    0.7.4 offers neither tile, so no 0.7.4 id stands for them and none is blocked."""
    report = matrix_reports("gemm-field-reports-fi0.6.17.yaml")[0]
    out = tmp_path / "blocklist.json"
    argv = ["export-blocklist", "--dense", "--arch", "sm120", str(report), "--accept-virtual", "--gpu", GPU]
    assert main([*argv, "-o", str(out)]) == 0
    assert json.loads(out.read_text())["invalid_tactics"] == {}
    assert capsys.readouterr().err.count("failing but offered by no dense tactic") == 4


def test_without_dense_the_commands_stay_the_moe_backends(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tactics", "--help"])
    help_text = capsys.readouterr().out
    assert "--dense" in help_text and "--clamped-relu2" in help_text  # one parser, both backends' options
    assert main(["export-blocklist", "--arch", "sm120"]) == 2  # the MoE export still needs results
    assert "needs at least one results file" in capsys.readouterr().err


def test_explain_reads_dense_autotuner_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """A config-cache value, a blocklist entry with an id out of range and -1: SM120 fp4's binding
    builds CtaShape128x128x128B, 1x1x1, no swap_ab, data-parallel in -1's place (0.7.4's
    fp4_gemm_cutlass_sm120.cu), which is the tactic of that configuration."""
    pasted = '["CutlassFp4GemmRunner", 5]\n"fp4_gemm::CutlassFp4GemmRunner": [3, 40, -1]'
    rows = _json(capsys, "--arch", "sm120", "--dtype", "nvfp4-bf16", "--explain", pasted)
    assert [r["tactic"] for r in rows][:2] == [3, 5]
    default = rows[2]
    assert (default["tile_config"], default["cluster"], default["swap_ab"], default["stream_k"]) == (
        "CtaShape128x128x128B",
        "1x1x1",
        False,
        False,
    )
    assert main(["tactics", "--dense", "--arch", "sm120", "--dtype", "nvfp4-bf16", "--explain", pasted]) == 0
    assert "line 2: 40 is not an id of CutlassFp4GemmRunner here (fp4_gemm_cutlass_sm120: 0-31)" in (
        capsys.readouterr().err
    )
    # other runners' lines name nothing of this one; MoERunner's are the MoE command's
    argv = ["tactics", "--dense", "--arch", "sm120", "--dtype", "mxfp8-bf16", "--explain", '["MoERunner", 3]']
    assert main(argv) == 2
    assert "no line names a tactic of CutlassMxfp8GemmRunner" in capsys.readouterr().err


@pytest.mark.parametrize("dense", [["--dense"], []])
def test_a_release_and_a_sources_folder_together_are_refused_by_either_backend(
    dense: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--flashinfer`` and ``--flashinfer-sources`` both name the sources: one line, usage
    status, before anything is read (the MoE and the dense ``tactics`` ask the same helper)."""
    both = ["--flashinfer", "0.6.0", "--flashinfer-sources", str(tmp_path)]
    assert main(["tactics", *dense, "--arch", "sm120", "--dtype", "mxfp8", *both]) == 2
    assert "--flashinfer and --flashinfer-sources both name FlashInfer's sources: give one" in (
        capsys.readouterr().err
    )
