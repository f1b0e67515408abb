"""A release's own Python chooses nvcc options (``jit/fused_moe.py``'s ``nvcc_flags``), so a
planted or published release could make nvcc run a program at compile time (``-ccbin=SCRIPT``)
even with ``--tile-device compile``. Only macros, targets and optimisation switches are taken;
anything else stops the session with one line naming the flag and the file, and runs nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.compat import HARNESS_MACRO_PARAMS, MACRO
from pytest_tileconform.flashinfer.nvcc_flags import ReleaseFlagRefused, module_nvcc_flags
from pytest_tileconform.flashinfer.sources import FlashInferSources

QUIET = ("-W", "ignore::pytest.PytestAssertRewriteWarning", "-p", "no:cacheprovider")
MATRIX = """\
version: 1
backend: flashinfer-cutlass-moe
suites:
  - arch: sm100
    dtype: bf16
    tile: [128x128x64]
    problems: {experts: 2, rows: 8, n: 64, k: 64}
"""
FUSED_MOE = """\
def gen_cutlass_fused_moe_sm100_module(use_fast_build=False):
    nvcc_flags = [
        "-DCOMPILE_BLACKWELL_TMA_GEMMS",
        "-DENABLE_BF16",
        {flag!r},
    ]
    return nvcc_flags
"""
PAYLOAD = '#!/bin/sh\ntouch "{marker}"\nexec g++ "$@"\n'


def release_with(folder: Path, flag: str) -> Path:
    """A release folder (``flashinfer/data`` with the launcher the harness instantiates) whose
    SM100 module flags end with ``flag``."""
    data = folder / "flashinfer" / "data"
    probe = FlashInferSources(data, "9.9.9")
    for path in probe.common_sources:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("// stand-in\n")
    probe.launcher_inl.parent.mkdir(parents=True, exist_ok=True)
    macro = f"#define {MACRO}({', '.join(HARNESS_MACRO_PARAMS)})"
    nested = "namespace tensorrt_llm {\nnamespace kernels {\nnamespace cutlass_kernels_oss {\n"
    probe.launcher_inl.write_text(f"{nested}{macro}\n}}\n}}\n}}\n")
    for directory in probe.cutlass_include_dirs:
        directory.mkdir(parents=True, exist_ok=True)
    (data / "cutlass" / "include" / "cutlass" / "cutlass.h").parent.mkdir(parents=True, exist_ok=True)
    (data / "cutlass" / "include" / "cutlass" / "cutlass.h").write_text("// cutlass\n")
    (data / "VERSION").write_text("9.9.9\n")
    (folder / "flashinfer" / "jit").mkdir()
    (folder / "flashinfer" / "jit" / "fused_moe.py").write_text(FUSED_MOE.format(flag=flag))
    return folder


@pytest.mark.parametrize(
    "flag",
    [
        "-ccbin=/tmp/x.sh",
        "--compiler-bindir=/tmp",
        "-Xcompiler=-B/tmp/evil",
        "--compiler-options=-wrapper,/tmp/x.sh",
        "-Xptxas=-v",
        "-DOK=$(touch /tmp/x)",
        "-I/tmp/evil",
        "--options-file=/tmp/opts",
    ],
)
def test_flags_outside_the_allow_list_are_refused(tmp_path: Path, flag: str) -> None:
    package = release_with(tmp_path, flag) / "flashinfer"
    with pytest.raises(ReleaseFlagRefused) as refused:
        module_nvcc_flags(package, 100)
    assert repr(flag) in str(refused.value) and str(package / "jit" / "fused_moe.py") in str(refused.value)


def test_flashinfers_own_kinds_of_flags_are_taken(tmp_path: Path) -> None:
    for flag in ("-DCUTLASS_ENABLE_GDC_FOR_SM100=1", "-gencode=arch=compute_100a,code=sm_100a", "-O3"):
        package = release_with(tmp_path / flag.strip("-=,").replace("/", "_"), flag) / "flashinfer"
        assert module_nvcc_flags(package, 100) == ["-DCOMPILE_BLACKWELL_TMA_GEMMS", "-DENABLE_BF16", flag]


def test_ccbin_from_a_wheel_stops_the_session_and_runs_nothing(pytester: pytest.Pytester) -> None:
    """``--tile-device compile`` on a release whose module flags name a compiler script: one
    line naming the flag and the file, and the script never runs."""
    marker = pytester.path / "payload-ran"
    script = pytester.path / "evil.sh"
    script.write_text(PAYLOAD.format(marker=marker))
    script.chmod(0o755)
    release = release_with(pytester.path / "release", f"-ccbin={script}")
    (pytester.path / "m.yaml").write_text(MATRIX)
    result = pytester.runpytest(
        "--tile-matrix",
        "m.yaml",
        "--tile-device",
        "compile",
        "--tile-flashinfer",
        str(release),
        "--tile-cache-dir",
        str(pytester.path / "cache"),
        *QUIET,
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert len(errors) == 1, text
    assert f"'-ccbin={script}'" in errors[0] and "jit/fused_moe.py" in errors[0], text
    assert not marker.exists()
