"""Fetching and caching FlashInfer releases, with tiny fake wheels built here (no network)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from helpers.fake_backend import QUIET, TileRun, output
from helpers.wheels import KEPT, NV, make_wheel

from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO
from pytest_tileconform.flashinfer.generator import load_generator
from pytest_tileconform.flashinfer.releases import (
    ReleaseError,
    fetch_release,
    release_from_folder,
    resolve_release,
    unpack_wheel,
)
from pytest_tileconform.flashinfer.settings import Settings
from pytest_tileconform.flashinfer.sources import LAUNCHER_INL, find_sources


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_unpacks_only_the_kernel_sources_pinned_by_hash(tmp_path: Path, cache: Path) -> None:
    wheel = make_wheel(tmp_path)
    release = unpack_wheel(wheel, cache)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert (release.version, release.sha256) == ("0.6.0", sha)
    assert release.data_dir == cache / "flashinfer-releases" / sha[:2] / sha / "flashinfer" / "data"
    entry = release.data_dir.parent.parent
    unpacked = {str(p.relative_to(entry)) for p in entry.rglob("*") if p.is_file()}
    assert unpacked == {*KEPT, "flashinfer/data/VERSION", "release.json"}
    assert not (tmp_path / "escape.txt").exists() and not list(cache.rglob("escape.txt"))
    meta = json.loads((entry / "release.json").read_text())
    assert (meta["version"], meta["sha256"], meta["files"]) == ("0.6.0", sha, len(KEPT))
    assert f"sha256:{sha}" in release.ident
    # no temp directories left behind
    assert [p.name for p in entry.parent.iterdir() if p.name.startswith(".")] == []
    # the data directory works as --tile-flashinfer-sources too
    assert find_sources(release.data_dir).version == "0.6.0"


def test_second_unpack_reuses_the_entry(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = make_wheel(tmp_path)
    first = unpack_wheel(wheel, cache)

    def no_zip(*args: object, **kwargs: object) -> None:
        raise AssertionError("the wheel was opened again")

    monkeypatch.setattr(zipfile, "ZipFile", no_zip)
    assert unpack_wheel(wheel, cache).data_dir == first.data_dir


def test_torn_entry_is_replaced(tmp_path: Path, cache: Path) -> None:
    wheel = make_wheel(tmp_path)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    torn = cache / "flashinfer-releases" / sha[:2] / sha
    (torn / "flashinfer" / "data").mkdir(parents=True)  # as a crash mid-rename could not leave
    (torn / "junk").write_text("x")  # but a hand-made mess might
    release = unpack_wheel(wheel, cache)
    assert not (torn / "junk").exists()
    assert (release.data_dir / "csrc" / "nv_internal" / LAUNCHER_INL).is_file()


def test_concurrent_unpacks_publish_one_entry(tmp_path: Path, cache: Path) -> None:
    wheel = make_wheel(tmp_path)
    results: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(unpack_wheel(wheel, cache).data_dir)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(results)) == 1
    parent = results[0].parent.parent.parent
    assert sorted(p.name for p in parent.iterdir() if not p.name.endswith(".lock")) == [
        results[0].parent.parent.name
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"name": "flashinfer-jit-cache"},
            "names distribution 'flashinfer-jit-cache', not flashinfer-python",
        ),
        (
            {"files": {"flashinfer/__init__.py": ""}},
            f"missing flashinfer/data/csrc/nv_internal/{LAUNCHER_INL}",
        ),
    ],
)
def test_wheels_that_cannot_be_judged(
    tmp_path: Path, cache: Path, kwargs: dict[str, object], message: str
) -> None:
    wheel = make_wheel(tmp_path, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ReleaseError, match=re.escape(message)):
        unpack_wheel(wheel, cache)
    assert not list((cache / "flashinfer-releases").rglob("release.json"))


def test_not_a_zip(tmp_path: Path, cache: Path) -> None:
    bogus = tmp_path / "flashinfer_python-0.6.0-py3-none-any.whl"
    bogus.write_text("not a zip")
    with pytest.raises(ReleaseError, match="not a readable wheel"):
        resolve_release(str(bogus), cache)


class FakePip:
    """Stands in for ``python -m pip``: 'downloads' a prepared wheel into -d DIR."""

    def __init__(self, wheel: Path | None, returncode: int = 0, stderr: str = "") -> None:
        self.wheel, self.returncode, self.stderr = wheel, returncode, stderr
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(args))
        dest = Path(args[args.index("-d") + 1])
        if self.wheel is not None and self.returncode == 0:
            (dest / self.wheel.name).write_bytes(self.wheel.read_bytes())
        return subprocess.CompletedProcess(list(args), self.returncode, "", self.stderr)


def test_fetch_by_version_once(tmp_path: Path, cache: Path) -> None:
    pip = FakePip(make_wheel(tmp_path, "0.6.7.post3"))
    first = fetch_release("0.6.7.post3", cache, pip)
    assert first.version == "0.6.7.post3" and first.origin.startswith("package index")
    (call,) = pip.calls
    assert call[0] == "download" and "--no-deps" in call and "--only-binary=:all:" in call
    assert call[-1] == "flashinfer-python==0.6.7.post3"
    again = fetch_release("0.6.7.post3", cache, pip)
    assert len(pip.calls) == 1 and again.sha256 == first.sha256 and again.data_dir == first.data_dir
    # the download directory is gone; only the unpacked sources stay
    assert not list(cache.rglob("*.whl"))


GENERATOR = "flashinfer/jit/gemm/cutlass"


def test_a_release_whose_generator_was_loaded_is_reused_without_its_wheel(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a release's generator (gen-matrix, drift, the MoE backend) leaves its entry as it was
    unpacked, no ``__pycache__`` beside the files even where Python writes bytecode: the next run
    finds it complete and verified, and an air-gapped one (pip cannot reach the index) needs no
    wheel."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    generator = {
        f"{GENERATOR}/__init__.py": "",
        f"{GENERATOR}/cutlass_library.py": "LIBRARY = 1\n",
        f"{GENERATOR}/generate_kernels.py": "from . import cutlass_library\n",
    }
    first = fetch_release("0.6.0", cache, FakePip(make_wheel(tmp_path, files={**KEPT, **generator})))
    assert load_generator(first.sources()).cutlass_library.LIBRARY == 1
    assert not list(first.data_dir.parent.parent.rglob("__pycache__"))
    offline, said = FakePip(None, 1, "ERROR: network is unreachable\n"), list[str]()
    again = fetch_release("0.6.0", cache, offline, say=said.append)
    assert (again.data_dir, again.sha256) == (first.data_dir, first.sha256)
    assert offline.calls == [] and said == []


def test_fetch_failure_says_what_pip_said(cache: Path) -> None:
    pip = FakePip(None, 1, "ERROR: No matching distribution found for flashinfer-python==9.9.9\n")
    with pytest.raises(ReleaseError, match=r"No matching distribution found.*air-gapped"):
        fetch_release("9.9.9", cache, pip)


def test_fetch_checks_the_version_it_got(tmp_path: Path, cache: Path) -> None:
    pip = FakePip(make_wheel(tmp_path, "0.6.1"))
    with pytest.raises(ReleaseError, match=r"gave flashinfer_python-0\.6\.1-py3-none-any\.whl \(0\.6\.1\)"):
        fetch_release("0.6.0", cache, pip)
    assert not (cache / "flashinfer-releases" / "versions" / "0.6.0.json").exists()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("latest", "neither a release version .like 0.6.0. nor an existing wheel or folder"),
        ("0.6.0; rm -rf /", "neither a release version"),
        ("missing.whl", "wheel missing.whl does not exist"),
    ],
)
def test_bad_specs(cache: Path, spec: str, message: str) -> None:
    with pytest.raises(ReleaseError, match=message):
        resolve_release(spec, cache, FakePip(None))


@pytest.mark.parametrize("layout", ["unpacked-wheel", "package", "data"])
def test_folders_are_used_in_place(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(make_wheel(tmp_path, "0.5.3")) as zf:
        zf.extractall(root, members=[m for m in zf.namelist() if m in KEPT or "dist-info" in m])
    given = {"unpacked-wheel": root, "package": root / "flashinfer", "data": root / "flashinfer" / "data"}
    release = release_from_folder(given[layout])
    assert release.data_dir == root / "flashinfer" / "data"
    assert release.version == "0.5.3"  # from the dist-info next to the package
    assert release.sha256 == "" and "sources sha256:" in release.ident


def test_incomplete_folder(tmp_path: Path) -> None:
    (tmp_path / "csrc").mkdir()
    with pytest.raises(ReleaseError, match="incomplete, missing csrc/nv_internal/"):
        resolve_release(str(tmp_path), tmp_path / "cache")
    with pytest.raises(ReleaseError, match="not laid out like a FlashInfer release"):
        resolve_release(str(tmp_path / "csrc"), tmp_path / "cache")


def test_plugin_option_errors_are_usage_errors(tc: TileRun, tmp_path: Path) -> None:
    from helpers.fake_backend import BASIC

    tc.matrix(BASIC)
    result = tc.run("--tile-flashinfer", "nonsense", "--tile-cache-dir", str(tmp_path / "c"))
    assert result.ret == 4, output(result)
    assert "--tile-flashinfer nonsense: 'nonsense' is neither a release version" in output(result)
    both = tc.run("--tile-flashinfer", "0.6.0", "--tile-flashinfer-sources", str(tmp_path))
    assert both.ret == 4 and "give one" in output(both)


def test_plugin_judges_against_the_release(tc: TileRun, tmp_path: Path) -> None:
    from helpers.fake_backend import BASIC

    wheel = make_wheel(tmp_path, "0.6.4")
    tc.matrix(BASIC.replace("backend: fake", "backend: flashinfer-cutlass-moe"))
    report = tmp_path / "report.json"
    # the fake wheel's launcher is only a macro: the harness cannot compile against it, and
    # that is reported as "not judgeable" (a skip naming the release), never as a verdict
    result = tc.run(
        "--tile-flashinfer",
        str(wheel),
        "--tile-cache-dir",
        str(tmp_path / "c"),
        "--tile-device",
        "compile",
        "--tile-report",
        str(report),
        "-k",
        "128x64x64",
        "-rs",
        *QUIET,
    )
    assert result.ret == 0, output(result)
    (case,) = json.loads(report.read_text())["cases"]
    assert case["outcome"] == "skipped" and case["verdict"] is None
    assert (
        "the tool cannot build sm90 bf16 x bf16 -> bf16 none against FlashInfer 0.6.4" in case["skip_reason"]
    )
    # nvcc's first error in the probe, located in the tool's own code (the harness or the probe unit)
    reason = case["skip_reason"]
    assert re.search(r"(flashinfer/harness/[\w.]+|probe\.cu)\(\d+\): error", reason), reason


def test_verdicts_name_the_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend_settings: Callable[..., Settings]
) -> None:
    """The backend names the --tile-flashinfer release (its Settings.release) in every verdict;
    without one, verdicts name none."""
    from helpers.cases import make_case

    from pytest_tileconform.compile.cache import BuildResult
    from pytest_tileconform.flashinfer.backend import FlashInferBackend
    from pytest_tileconform.verdict import Verdict

    release = unpack_wheel(make_wheel(tmp_path, "0.6.4"), tmp_path / "c")

    def judged(settings: Settings) -> Verdict:
        backend = FlashInferBackend(settings, progress=lambda _msg: None)
        backend._sources = release.sources()
        backend.__dict__["_incompatibility"] = None  # the fake wheel's launcher is only a macro
        built = BuildResult(ok=True, path=tmp_path, seconds=0.0)
        monkeypatch.setattr(backend, "_build", lambda case: built)
        return backend.judge(make_case())

    verdict = judged(backend_settings(sources=release.data_dir, release=release.ident))
    assert verdict.extra["flashinfer_release"] == release.ident
    assert release.ident == f"flashinfer-python 0.6.4 (wheel sha256:{release.sha256})"
    other = judged(backend_settings(sources=release.data_dir))
    assert "flashinfer_release" not in other.extra


def test_the_plugin_gives_the_release_to_the_backend(tc: TileRun, tmp_path: Path) -> None:
    from helpers.fake_backend import BASIC

    from pytest_tileconform.core.items import SESSION_KEY

    wheel = make_wheel(tmp_path, "0.6.4")
    tc.matrix(BASIC.replace("backend: fake", "backend: flashinfer-cutlass-moe"))
    cache = tmp_path / "c"
    config = tc.pytester.parseconfigure(
        "--tile-matrix", "m.yaml", "--tile-flashinfer", str(wheel), "--tile-cache-dir", str(cache)
    )
    backend = config.stash[SESSION_KEY].registry["flashinfer-cutlass-moe"]
    assert backend.settings.release == unpack_wheel(wheel, cache).ident  # type: ignore[attr-defined]


def test_plugin_refuses_a_release_the_harness_cannot_instantiate(tc: TileRun, tmp_path: Path) -> None:
    from helpers.fake_backend import BASIC

    params = ", ".join(p for p in HARNESS_MACRO_PARAMS if p != "SWAP_AB_")
    old = f"#define {MACRO}({params})\n"
    wheel = make_wheel(tmp_path, "0.5.0", files={**KEPT, f"{NV}/{LAUNCHER_INL}": old})
    tc.matrix(BASIC.replace("backend: fake", "backend: flashinfer-cutlass-moe"))
    result = tc.run("--tile-flashinfer", str(wheel), "--tile-cache-dir", str(tmp_path / "c"))
    assert result.ret == 4, output(result)
    assert "flashinfer-python 0.5.0 (wheel sha256:" in output(result)
    assert "cannot be judged by this harness" in output(result)
    assert "takes 16 parameters without SWAP_AB_" in output(result)
