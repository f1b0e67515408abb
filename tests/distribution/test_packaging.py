"""The distribution: pyproject's declarations, the wheel's contents, and the commands that must
work where torch is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.evidence import report
from helpers.paths import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())
RESULTS = report("sm120-virtual")
TACTICS = REPO / "tests" / "data" / "tactics-sm120-flashinfer-0.7.4.jsonl"


def test_packages_lists_every_package_folder() -> None:
    """pyproject lists the packages (automatic discovery cannot map matrices/ into the package):
    a folder of the package that is missing there would be missing from the wheel."""
    package = REPO / "pytest_tileconform"
    found = {"pytest_tileconform.matrices"}
    for folder, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if any(not f.endswith(".pyc") for f in files):
            found.add(".".join(Path(folder).relative_to(REPO).parts))
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert sorted(setuptools["packages"]) == sorted(found)
    assert setuptools["package-dir"] == {"pytest_tileconform.matrices": "matrices"}
    assert setuptools["package-data"]["pytest_tileconform.matrices"] == ["*.yaml"]


def test_torch_is_not_a_hard_dependency() -> None:
    project = PYPROJECT["project"]
    assert not [d for d in project["dependencies"] if d.split(">")[0].split("=")[0].strip() == "torch"]
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["flashinfer"])


def test_classifiers_and_license() -> None:
    trove = pytest.importorskip("trove_classifiers")
    classifiers = PYPROJECT["project"]["classifiers"]
    assert [c for c in classifiers if c not in trove.classifiers] == []
    assert {"Framework :: Pytest", "Environment :: GPU :: NVIDIA CUDA"} <= set(classifiers)
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_wheel_holds_the_matrices_and_needs_no_torch(tmp_path: Path) -> None:
    """Built from a copy of the files the build reads, as pip builds it (isolated)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "pytest_tileconform", source / "pytest_tileconform", ignore=ignore)
    shutil.copytree(REPO / "matrices", source / "matrices")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for path in sorted(REPO.joinpath("matrices").glob("*.yaml")):
            assert archive.read(f"pytest_tileconform/matrices/{path.name}") == path.read_bytes()
        metadata = archive.read("pytest_tileconform-0.1.0.dist-info/METADATA").decode()
    assert {
        "pytest_tileconform/flashinfer/harness/harness.cu",
        "pytest_tileconform/flashinfer/tactics/probe.cu",
        "pytest_tileconform/virtual/runtime/vcudart.cpp",
        "pytest_tileconform/py.typed",
        "pytest_tileconform-0.1.0.dist-info/licenses/LICENSE",
    } <= names
    assert not [n for n in names if n.startswith("matrices/")]
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: torch")]
    assert requires and all('extra == "flashinfer"' in line for line in requires)
    assert "License-Expression: Apache-2.0" in metadata


# -- without torch --------------------------------------------------------------------------------
NO_TORCH = textwrap.dedent(
    """\
    import importlib.abc
    import sys


    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "numpy"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None


    sys.meta_path.insert(0, NoTorch())
    """
)


def _without_torch(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python argv...`` in a process where importing torch (or numpy) fails."""
    blocker = tmp_path / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(NO_TORCH)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not an xdist worker
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )


def test_the_commands_that_read_files_work_without_torch(tmp_path: Path) -> None:
    from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_sources

    try:
        sources = str(find_sources().root)  # drift reads FlashInfer's generator, as sources
    except FlashInferSourcesError:
        sources = ""
    results, tactics = str(RESULTS), str(TACTICS)
    commands: list[list[str]] = [
        ["--version"],
        ["matrices"],
        ["matrices", "copy", "smoke-sm90", str(tmp_path / "smoke.yaml")],
        ["report", "schema"],
        ["report", "merge", results],
        ["report", "compare", results, results],
        ["report", "diff", results, results],
        [
            "export-blocklist",
            "--arch",
            "sm120",
            results,
            "--tactics",
            tactics,
            "--accept-virtual",
            "--gpu",
            "X",
        ],
    ]
    if sources:
        commands.append(
            ["drift", "--arch", "sm120", results, "--tactics", tactics, "--flashinfer-sources", sources]
        )
    script = textwrap.dedent(
        f"""\
        import json, sys
        from pytest_tileconform.commands.cli import main
        status = []
        for argv in {commands!r}:
            try:
                status.append(main(argv))
            except SystemExit as exc:
                status.append(exc.code)
        print("STATUS", json.dumps(status), "TORCH", "torch" in sys.modules)
        """
    )
    proc = _without_torch(tmp_path, "-c", script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("STATUS"))
    assert json.loads(line.split(" ", 1)[1].rsplit(" TORCH", 1)[0]) == [0] * len(commands), proc.stderr[
        -3000:
    ]
    assert line.endswith("TORCH False")
    assert (tmp_path / "smoke.yaml").is_file()


def test_pytest_collects_a_shipped_matrix_without_torch(tmp_path: Path) -> None:
    shutil.copy(REPO / "matrices" / "smoke-sm90.yaml", tmp_path / "smoke.yaml")
    proc = _without_torch(
        tmp_path,
        "-m",
        "pytest",
        "--tile-matrix",
        "smoke.yaml",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "6 tests collected" in proc.stdout


def test_the_sdist_and_the_wheel_leave_the_workshop_out(tmp_path: Path) -> None:
    """Built from a copy of every tracked file: neither the sdist nor the wheel carries lab/ (the
    rented GPU host's provisioning), results/, scripts/ or benchmarks/."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: which files are tracked is unknown")
    source = tmp_path / "src"
    for name in listed.stdout.decode().split("\0"):
        if name and (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / name, source / name)
    assert (source / "lab" / "gpu-env.sh").is_file()
    built = []
    for kind in ("sdist", "wheel"):  # one process each, as a build frontend runs them
        build = f"import sys\nfrom setuptools import build_meta as b\nprint(b.build_{kind}(sys.argv[1]))\n"
        done = subprocess.run(
            [sys.executable, "-c", build, str(tmp_path / kind)], cwd=source, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        built.append(tmp_path / kind / done.stdout.split()[-1])
    sdist, wheel = built
    with tarfile.open(sdist) as archive:
        members = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    with zipfile.ZipFile(wheel) as archive:
        members += archive.namelist()
    workshop = ("lab/", "results/", "scripts/", "benchmarks/")
    assert "pytest_tileconform/plugin.py" in members
    assert [name for name in members if name.startswith(workshop)] == []
