"""tileconform export-blocklist: failing configurations as FlashInfer's tactics blocklist.

The file is read back with FlashInfer's own ``TacticsBlocklist`` (flashinfer/tactics_blocklist.py,
loaded on its own: its two imports from ``flashinfer.autotuner`` are provided from autotuner.py's
real source, cut out with ``ast``, except ``_collect_metadata``, which needs torch and a GPU and
is replaced by a fixed environment).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import document as report_document
from helpers.evidence import report
from helpers.paths import DATA

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_sources

REPO = DATA.parent.parent
SM120_RESULTS = report("sm120-virtual")
RECORDED = DATA / "tactics-sm120-flashinfer-0.7.4.jsonl"
ENVIRONMENT = {
    "flashinfer_version": "0.7.4",
    "cuda_version": "13.0",
    "cublas_version": "13.1.0",
    "cudnn_version": "91500",
    "cudnn_frontend_version": "1.16.0",
    "cutlass_dsl_version": "unknown",
    "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}


@pytest.fixture(scope="module")
def blocklist_class() -> Any:
    try:
        sources = find_sources()
    except FlashInferSourcesError as exc:
        pytest.skip(str(exc))
    package_dir = sources.root.parent
    source = package_dir / "tactics_blocklist.py"
    autotuner = package_dir / "autotuner" / "autotuner.py"
    if not source.is_file() or not autotuner.is_file():
        pytest.skip("this FlashInfer has no tactics_blocklist.py")
    tree = ast.parse(autotuner.read_text())
    wanted = {"_tactic_to_json", "_tactic_to_json_hashable"}
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {f.name for f in functions} == wanted
    body: list[ast.stmt] = list(functions)
    package = "_tileconform_fake_flashinfer"
    fake_autotuner = types.ModuleType(f"{package}.autotuner")
    exec(compile(ast.Module(body=body, type_ignores=[]), str(autotuner), "exec"), fake_autotuner.__dict__)
    fake_autotuner._METADATA_KEY = "_metadata"  # type: ignore[attr-defined]
    fake_autotuner._collect_metadata = lambda: dict(ENVIRONMENT)  # type: ignore[attr-defined]
    jit = types.ModuleType(f"{package}.jit")
    core = types.ModuleType(f"{package}.jit.core")
    core.logger = logging.getLogger("fake-flashinfer")  # type: ignore[attr-defined]
    root = types.ModuleType(package)
    root.__path__ = []
    sys.modules.update(
        {
            package: root,
            f"{package}.autotuner": fake_autotuner,
            f"{package}.jit": jit,
            f"{package}.jit.core": core,
        }
    )
    spec = importlib.util.spec_from_file_location(f"{package}.tactics_blocklist", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TacticsBlocklist


class MoERunner:  # the class name is part of FlashInfer's key
    pass


def _export(tmp_path: Path, *extra: str, results: Path = SM120_RESULTS) -> dict[str, Any]:
    out = tmp_path / "blocklist.json"
    argv = ["export-blocklist", "--arch", "sm120", str(results), "--tactics", str(RECORDED)]
    assert main([*argv, *extra, "-o", str(out)]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _virtual(*extra: str) -> tuple[str, ...]:
    """The recorded results are the virtual sm120 device's: accepted only when asked to."""
    return ("--accept-virtual", "--gpu", ENVIRONMENT["gpu"], *extra)


def _on_hardware(tmp_path: Path, name: str = ENVIRONMENT["gpu"], **changes: str) -> Path:
    """The recorded virtual results as if a GPU called ``name`` had judged them (format 2, whose
    verdicts name their device); ``changes`` maps case ids to another outcome."""
    data = report_document(SM120_RESULTS)
    data["format"] = 2
    for entry in data["cases"]:
        verdict = entry["verdict"]
        verdict["device"] = {"kind": "hardware", "name": name, "arch": "sm120", "cc": "12.0"}
        verdict["source"] = f"hardware ({name}, CC 12.0)"
        if entry["id"] in changes:
            verdict["outcome"] = changes[entry["id"]]
            verdict["failed_stage"] = None if verdict["outcome"] == "pass" else verdict["outcome"]
    path = tmp_path / f"hardware-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(data))
    return path


FINALIZE = "sm120-nvfp4-bf16-128x256x128-c1x1x1-finalize"


def test_flashinfer_reads_it_and_filters_the_failing_tactics(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path, *_virtual())
    # the two finalize tiles rejected at initialize by the virtual sm120 device; GEMM 2 only
    # (finalize is GEMM 2's epilogue). Ids: the recorded tactic list of the nvfp4 -> bf16 runner.
    assert document["invalid_tactics"] == {"trtllm::fused_moe::gemm2::MoERunner": [26, 27]}
    lines = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    by_id = {r["tactic"]: r for r in lines if r["runner"] == "nvfp4-bf16"}
    assert {tuple(by_id[t]["instantiation"]["tile"]) for t in (26, 27)} == {(256, 128, 128), (128, 256, 128)}
    assert all(by_id[t]["fusion"] == "finalize" and not by_id[t]["swap_ab"] for t in (26, 27))

    blocklist = blocklist_class()
    assert blocklist.load(str(tmp_path / "blocklist.json")) is True
    assert blocklist.summary() == {"trtllm::fused_moe::gemm2::MoERunner": 2}
    gemm2 = list(range(16, 48))
    assert blocklist.filter("trtllm::fused_moe::gemm2", MoERunner(), gemm2) == [
        t for t in gemm2 if t not in (26, 27)
    ]
    assert blocklist.filter("trtllm::fused_moe::gemm1", MoERunner(), list(range(16))) == list(range(16))


def test_wildcards_match_any_environment_but_the_gpu_does_not(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path, "--accept-virtual", "--gpu", "NVIDIA GeForce RTX 5090")
    meta = document["_metadata"]
    assert (
        meta["flashinfer_version"] == "0.7.4"
        and meta["cuda_version"] == "*"
        and meta["generator_version"] == "1.0"
    )
    assert blocklist_class().load(str(tmp_path / "blocklist.json")) is False  # another GPU: skipped


def test_written_like_tacticsblocklist_save(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path, *_virtual())
    ours = (tmp_path / "blocklist.json").read_text()
    theirs = tmp_path / "theirs.json"
    blocklist_class.save(str(theirs), document["invalid_tactics"], metadata=document["_metadata"])
    saved = json.loads(theirs.read_text())
    saved["_metadata"]["generated_at"] = document["_metadata"]["generated_at"]
    assert json.dumps(saved, indent=2) + "\n" == ours


def test_several_dtypes_need_a_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = report_document(SM120_RESULTS)
    for entry in results["cases"]:
        if entry["case"]["act"] == "mxfp8":
            entry["verdict"].update(outcome="numerics", failed_stage="numerics")
            break
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    argv = ["export-blocklist", "--arch", "sm120", str(path), "--tactics", str(RECORDED), *_virtual()]
    assert main(argv) == 2
    assert "choose one with --dtype" in capsys.readouterr().err
    assert main([*argv, "--dtype", "mxfp8xmxfp4-bf16"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document["invalid_tactics"]) == [
        "trtllm::fused_moe::gemm1::MoERunner",
        "trtllm::fused_moe::gemm2::MoERunner",
    ]


def test_nothing_failing_is_an_empty_blocklist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = report_document(SM120_RESULTS)
    for entry in results["cases"]:
        entry["verdict"].update(outcome="pass", failed_stage=None)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    argv = ["export-blocklist", "--arch", "sm120", str(path), "--tactics", str(RECORDED), *_virtual()]
    assert main(argv) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["invalid_tactics"] == {}
    # virtual passes only: every configuration is listed as not known to work on the GPU
    unrun = document["_metadata"]["tileconform"]["unrun"]
    assert sum(len(u["case_ids"]) for u in unrun) == len(results["cases"])
    assert {u["dtypes"] for u in unrun} == {"nvfp4-bf16", "mxfp8xmxfp4-bf16"}
    assert "NOT known to work on NVIDIA RTX PRO 6000 Blackwell Server Edition" in captured.err


def test_drift_and_export_blocklist_share_their_options() -> None:
    import argparse

    from pytest_tileconform.commands.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def options(name: str) -> dict[str, tuple[Any, ...]]:
        return {
            option: (action.help, action.type, action.metavar, action.default)
            for action in commands.choices[name]._actions
            for option in action.option_strings
        }

    drift, export = options("drift"), options("export-blocklist")
    for option in (
        "--arch",
        "--results",
        "--tactics",
        "--save-tactics",
        "--cache-dir",
        "--flashinfer-sources",
    ):
        assert drift[option] == export[option], option
    assert drift["-o"][1:] == export["-o"][1:]
    # export-blocklist needs results, drift does not
    assert main(["export-blocklist", "--arch", "sm120", "--tactics", str(RECORDED)]) == 2


def test_every_command_takes_the_same_archs() -> None:
    """One list, the architecture registry's: the virtual device has a profile for each (named as
    its key), and FlashInfer's generator and the tactics probe are read for them."""
    import argparse

    from pytest_tileconform.archs import KNOWN as ARCHS
    from pytest_tileconform.commands.cli import build_parser
    from pytest_tileconform.flashinfer.generator import GENERATOR_ARCH
    from pytest_tileconform.flashinfer.tactics.offered import PROBE_SMS
    from pytest_tileconform.virtual.profiles import BUILTIN

    assert all(profile.arch == arch for arch, profile in BUILTIN.items())
    assert tuple(BUILTIN) == ARCHS and set(GENERATOR_ARCH) == set(ARCHS) and set(PROBE_SMS) <= set(ARCHS)
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    taking = {
        name: next(a.choices for a in parser._actions if "--arch" in a.option_strings)
        for name, parser in commands.choices.items()
        if any("--arch" in a.option_strings for a in parser._actions)
    }
    assert set(taking) == {"gen-matrix", "drift", "export-blocklist", "bisect", "tactics"}
    assert all(tuple(choices) == ARCHS for choices in taking.values())


def test_virtual_verdicts_alone_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the tactics are asked for: no probe is built for a list that is not written."""
    argv = ["export-blocklist", "--arch", "sm120", str(SM120_RESULTS), "--flashinfer-sources", "/nonexistent"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no verdict for sm120 in these results files is from a GPU (38 virtual-device" in err
    assert "--accept-virtual" in err
    assert main([*argv, "--accept-virtual"]) == 2
    assert "give --gpu NAME" in capsys.readouterr().err
    assert main([*argv, "--gpu", "NVIDIA GeForce RTX 5090"]) == 2  # --gpu alone accepts nothing
    assert "--accept-virtual" in capsys.readouterr().err


def test_hardware_verdicts_name_the_gpu(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path, results=_on_hardware(tmp_path))
    assert document["_metadata"]["gpu"] == ENVIRONMENT["gpu"]
    assert document["invalid_tactics"] == {"trtllm::fused_moe::gemm2::MoERunner": [26, 27]}
    assert document["_metadata"]["tileconform"]["verdicts"] == {"hardware": 38, "build": 0, "virtual": 0}
    assert blocklist_class().load(str(tmp_path / "blocklist.json")) is True


def test_gpu_must_match_the_hardware(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = str(_on_hardware(tmp_path))
    argv = ["export-blocklist", "--arch", "sm120", results, "--tactics", str(RECORDED)]
    assert main([*argv, "--gpu", "NVIDIA GeForce RTX 5090"]) == 2
    assert "but the hardware verdicts are from 'NVIDIA RTX PRO 6000" in capsys.readouterr().err
    other = str(_on_hardware(tmp_path, "NVIDIA GeForce RTX 5090"))
    assert main([*argv, other]) == 2
    assert "hardware results from several GPUs" in capsys.readouterr().err


def test_virtual_failures_count_only_when_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU passed everything the virtual device failed: the list is empty unless the virtual
    verdicts are accepted, and then it is still for the GPU that was judged."""
    passed = _on_hardware(tmp_path, **{c: "pass" for c in (FINALIZE, FINALIZE.replace("128x256", "256x128"))})
    argv = [
        "export-blocklist",
        "--arch",
        "sm120",
        str(passed),
        str(SM120_RESULTS),
        "--tactics",
        str(RECORDED),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["invalid_tactics"] == {}
    assert "38 virtual-device verdict(s) for sm120 not used (--accept-virtual uses them)" in captured.err
    assert main([*argv, "--accept-virtual"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["invalid_tactics"] == {"trtllm::fused_moe::gemm2::MoERunner": [26, 27]}
    assert document["_metadata"]["gpu"] == ENVIRONMENT["gpu"]


def test_build_verdicts_hold_on_every_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A compile error is a failure on any GPU: used with the hardware verdicts, no flag needed."""
    path = _on_hardware(tmp_path)
    data = json.loads(path.read_text())
    for entry in data["cases"]:
        if entry["id"] == FINALIZE:
            entry["verdict"]["device"] = {"kind": "build", "name": "nvcc", "arch": None, "cc": None}
            entry["verdict"].update(outcome="compile", failed_stage="compile")
    path.write_text(json.dumps(data))
    argv = ["export-blocklist", "--arch", "sm120", str(path), "--tactics", str(RECORDED)]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["invalid_tactics"] == {"trtllm::fused_moe::gemm2::MoERunner": [26, 27]}
    assert document["_metadata"]["tileconform"]["verdicts"] == {"hardware": 37, "build": 1, "virtual": 0}


def test_results_option_is_a_deprecated_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = str(_on_hardware(tmp_path))
    argv = ["export-blocklist", "--arch", "sm120", "--tactics", str(RECORDED)]
    assert main([*argv, "--results", results]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["invalid_tactics"] == {"trtllm::fused_moe::gemm2::MoERunner": [26, 27]}
    assert "--results is deprecated: give results files as arguments" in captured.err


def test_results_files_may_come_between_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse fills a positional list from one run of arguments; the command line takes several."""
    first, second = str(_on_hardware(tmp_path)), str(_on_hardware(tmp_path))
    argv = ["export-blocklist", first, "--arch", "sm120", second, "--tactics", str(RECORDED)]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["_metadata"]["tileconform"]["verdicts"]["hardware"] == 76
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--bogus"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
