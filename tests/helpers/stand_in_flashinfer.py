"""FlashInfer's backend with stand-ins: sources (a folder with the few files that make FlashInfer's
sources to the plugin), a compiler that copies its unit or is killed as the out-of-memory killer
kills nvcc, and the conftest that patches the backend to use them. The ``host`` fixture
(tests/conftest.py) puts them together in a pytester folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.sources import FlashInferSources

QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:cacheprovider")
MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm90
    dtype: bf16
    tile: [128x64x64, 128x128x64, 256x128x64]
    problems: {experts: 2, rows: 8, n: 64, k: 64}
"""
# The FlashInfer backend builds with a stand-in compiler (a unit lists its cases): it copies the
# source, or, when the source says KILL, is killed by SIGKILL as the out-of-memory killer kills
# nvcc. With STAND_IN_CODEGEN the unit is codegen's real text instead (a configuration codegen
# refuses is refused as in a real run). Patched for the session only (undone at unconfigure:
# in-process runs share the class).
STAND_IN_CONFTEST = """
import os, sys
from pathlib import Path

import pytest

from pytest_tileconform.compile.cache import BuildSpec
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.codegen import generate_translation_unit
from pytest_tileconform.flashinfer.features import release_features

HERE = Path(__file__).parent
_patch = pytest.MonkeyPatch()


def _source(backend, cases):
    if os.environ.get("STAND_IN_CODEGEN"):
        features = release_features(backend.sources.root)
        return generate_translation_unit([kernel_config(c) for c in cases], features)
    return os.environ.get("STAND_IN_SOURCE", "") + "".join(f"{c.id}\\n" for c in cases)


def _spec(self, cases, paired=None):
    return BuildSpec(
        source=_source(self, cases),
        command=(sys.executable, str(HERE / "stand_in_nvcc.py"), "{src}", "{out}"),
        salt="stand-in",
        ram_bytes=1,
        label=cases[0].id,
        roots=(("flashinfer", os.environ["TILECONFORM_FLASHINFER_SOURCES"]),),
        sources=("flashinfer",),
    )


def pytest_configure(config):
    _patch.setattr(FlashInferBackend, "_spec", _spec)
    _patch.setattr(FlashInferBackend, "_build_runtime", lambda self: None)
    # no nvcc probe
    _patch.setattr(FlashInferBackend, "_limitations", lambda self, cases, jobs=1, deadline=None: {})
    _patch.setattr(FlashInferBackend, "_incompatibility", None)
    if os.environ.get("STAND_IN_HOST"):  # no toolkit looked for: the stand-in needs none
        _patch.setattr(FlashInferBackend, "check_environment", lambda self, cases: None)


def pytest_unconfigure(config):
    _patch.undo()
"""
STAND_IN_NVCC = """
import os, pathlib, signal, sys, time
src, out = map(pathlib.Path, sys.argv[1:3])
text = src.read_text()
with open(src.parent.parent.parent / "compiles.log", "a") as log:
    log.write(f"{len(text.splitlines())}\\n")
if "KILL" in text:
    os.kill(os.getpid(), signal.SIGKILL)
if (slow := os.environ.get("STAND_IN_SLOW")) and slow in text:  # still compiling when stopped
    time.sleep(600)
time.sleep(float(os.environ.get("STAND_IN_SECONDS", "0")))
out.write_text(text)
"""


def make_sources(root: Path, version: str = "9.9.9") -> Path:
    """The files that make a folder FlashInfer's sources to this plugin, and a version."""
    probe = FlashInferSources(root, version)
    for path in [probe.launcher_inl, *probe.common_sources]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// stand-in\n")
    for directory in probe.cutlass_include_dirs:
        directory.mkdir(parents=True, exist_ok=True)
    (root / "VERSION").write_text(version + "\n")
    return root


def short_refusal(result: pytest.RunResult, most_lines: int = 8) -> str:
    """The one ERROR line of a session stopped for its environment, checked to be the only
    one, without a traceback, in a short output."""
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert len(errors) == 1, text
    assert len([line for line in text.splitlines() if line.strip()]) <= most_lines, text
    return errors[0]


# The FlashInfer backend's release checks as they are (features.missing_piece decides), with nvcc
# replaced: the probe's front end always builds, and a unit's build copies codegen's real text and
# logs its layout defines (TILECONFORM_MIXED_*) to units.log in the pytester folder. For a
# question of what the tool refuses against a release, not of what nvcc makes of it.
STAND_IN_NVCC_PLUGIN = """
import os, sys
from pathlib import Path

import pytest

from pytest_tileconform.compile.cache import BuildSpec
from pytest_tileconform.flashinfer import backend
from pytest_tileconform.flashinfer.backend import FlashInferBackend
from pytest_tileconform.flashinfer.buildscript import kernel_config
from pytest_tileconform.flashinfer.codegen import generate_translation_unit
from pytest_tileconform.flashinfer.features import release_features

COPY = (
    "import shutil, sys; src, out, log = sys.argv[1:4]; shutil.copy(src, out); "
    "lines = [l for l in open(src) if l.startswith('#define TILECONFORM_MIXED_')]; "
    "open(log, 'a').writelines(lines)"
)
_patch = pytest.MonkeyPatch()


def pytest_configure(config):
    log = str(Path.cwd() / "units.log")

    def spec(self, cases):
        features = release_features(self.sources.root)
        return BuildSpec(
            source=generate_translation_unit([kernel_config(c) for c in cases], features),
            command=(sys.executable, "-c", COPY, "{src}", "{out}", log),
            salt="stand-in",
            ram_bytes=1,
            label=cases[0].id,
        )

    builds = [sys.executable, "-c", "pass"]
    _patch.setattr(backend, "front_end", lambda sources, home: lambda config, src, out: builds)
    _patch.setattr(FlashInferBackend, "_spec", spec)
    _patch.setattr(FlashInferBackend, "_build_runtime", lambda self: None)


def pytest_unconfigure(config):
    _patch.undo()
"""
