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

from pytest_tileconform.commands.cli import main
from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_sources

DATA = Path(__file__).resolve().parent / "data"
REPO = DATA.parent.parent
SM120_RESULTS = REPO / "results" / "sm120-virtual-2026-11-29.json"
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


def _export(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "blocklist.json"
    argv = [
        "export-blocklist",
        "--arch",
        "sm120",
        "--results",
        str(SM120_RESULTS),
        "--tactics",
        str(RECORDED),
    ]
    assert main([*argv, *extra, "-o", str(out)]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_flashinfer_reads_it_and_filters_the_failing_tactics(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path, "--gpu", ENVIRONMENT["gpu"])
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
    document = _export(tmp_path, "--gpu", "NVIDIA GeForce RTX 5090")
    meta = document["_metadata"]
    assert (
        meta["flashinfer_version"] == "0.7.4"
        and meta["cuda_version"] == "*"
        and meta["generator_version"] == "1.0"
    )
    assert blocklist_class().load(str(tmp_path / "blocklist.json")) is False  # another GPU: skipped


def test_written_like_tacticsblocklist_save(tmp_path: Path, blocklist_class: Any) -> None:
    document = _export(tmp_path)
    ours = (tmp_path / "blocklist.json").read_text()
    theirs = tmp_path / "theirs.json"
    blocklist_class.save(str(theirs), document["invalid_tactics"], metadata=document["_metadata"])
    saved = json.loads(theirs.read_text())
    saved["_metadata"]["generated_at"] = document["_metadata"]["generated_at"]
    assert json.dumps(saved, indent=2) + "\n" == ours


def test_several_dtypes_need_a_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = json.loads(SM120_RESULTS.read_text())
    for entry in results["cases"]:
        if entry["case"]["act"] == "mxfp8":
            entry["verdict"]["outcome"] = "numerics"
            break
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    argv = ["export-blocklist", "--arch", "sm120", "--results", str(path), "--tactics", str(RECORDED)]
    assert main(argv) == 2
    assert "choose one with --dtype" in capsys.readouterr().err
    assert main([*argv, "--dtype", "mxfp8xmxfp4-bf16"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document["invalid_tactics"]) == [
        "trtllm::fused_moe::gemm1::MoERunner",
        "trtllm::fused_moe::gemm2::MoERunner",
    ]


def test_nothing_failing_is_an_empty_blocklist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = json.loads(SM120_RESULTS.read_text())
    for entry in results["cases"]:
        entry["verdict"]["outcome"] = "pass"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(results))
    assert (
        main(["export-blocklist", "--arch", "sm120", "--results", str(path), "--tactics", str(RECORDED)]) == 0
    )
    assert json.loads(capsys.readouterr().out)["invalid_tactics"] == {}


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
    with pytest.raises(SystemExit) as exit_info:  # export-blocklist needs results, drift does not
        main(["export-blocklist", "--arch", "sm120", "--tactics", str(RECORDED)])
    assert exit_info.value.code == 2
