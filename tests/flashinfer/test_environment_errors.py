"""A host that cannot judge the FlashInfer cases (no CUDA toolkit, no FlashInfer sources, a
virtual device of another arch, compiles killed for memory) stops the session once, with one
line that says what to do and pytest's usage-error status, instead of failing every case; and
the header says how the run will be judged, from lookups only.

The environment is simulated: CUDA_HOME and TILECONFORM_FLASHINFER_SOURCES, a folder with the
few files that make FlashInfer sources, and a stand-in compiler killed as the out-of-memory
killer would kill nvcc.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from helpers.stand_in_flashinfer import MATRIX, QUIET, STAND_IN_NVCC, short_refusal

from pytest_tileconform.compile.cache import BuildCache, BuildSpec
from pytest_tileconform.flashinfer.sources import ENV_SOURCES

MIXED = (
    MATRIX
    + """\
  - arch: sm120
    dtype: {act: nvfp4, weight: nvfp4, out: bf16}
    tile: [128x128x128]
    problems: {experts: 2, rows: 8, n: 64, k: 128}
"""
)


def compiles(host: pytest.Pytester) -> list[int]:
    log = host.path / "cache" / "compiles.log"
    return [int(n) for n in log.read_text().split()] if log.exists() else []


def test_a_missing_cuda_toolkit_is_one_line(host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    result = host.runpytest("--tile-matrix", "m.yaml", "-q", *QUIET)
    error = short_refusal(result)
    assert "$CUDA_HOME=/nonexistent is not a CUDA toolkit" in error
    assert "set CUDA_HOME to the toolkit's folder, or unset it" in error
    assert compiles(host) == []


def test_the_xdist_controller_refuses_once(host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    result = host.runpytest_subprocess("--tile-matrix", "m.yaml", "-n", "2", *QUIET)
    error = short_refusal(result, most_lines=12)
    assert "$CUDA_HOME=/nonexistent is not a CUDA toolkit" in error
    # the header said so before, once (the controller's)
    assert sum("nvcc: no usable CUDA toolkit" in line for line in result.outlines) == 1


def test_collect_only_needs_no_toolkit(host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setenv(ENV_SOURCES, str(host.path / "nowhere"))
    result = host.runpytest("--tile-matrix", "m.yaml", "--collect-only", "-q", *QUIET)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*3 tests collected*"])


def test_a_run_that_selects_no_flashinfer_case_needs_no_toolkit(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    host.makepyfile(test_other="def test_other():\n    pass\n")
    result = host.runpytest("--tile-matrix", "m.yaml", "test_other.py", "-k", "test_other", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)


def test_hardware_without_the_gpu_skips_without_a_toolkit(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every case is skipped (its arch is absent) and nothing is compiled, so nothing of the
    toolkit is needed: the cases say why they were skipped, as before."""
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr("pytest_tileconform.flashinfer.backend.current_gpu", lambda: None)
    result = host.runpytest("--tile-matrix", "m.yaml", "--tile-device", "hardware", "-rs", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(skipped=3)
    assert "sm90 is not present (found no GPU)" in result.stdout.str()


@pytest.mark.parametrize("how", ["option", "env"])
def test_wrong_flashinfer_sources_are_one_line(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    wrong = host.path / "not-flashinfer"
    wrong.mkdir()
    args: tuple[str, ...] = ()
    if how == "option":
        args = ("--tile-flashinfer-sources", str(wrong))
    else:
        monkeypatch.setenv(ENV_SOURCES, str(wrong))
    error = short_refusal(host.runpytest("--tile-matrix", "m.yaml", "-q", *args, *QUIET))
    named = f"--tile-flashinfer-sources {wrong}" if how == "option" else f"${ENV_SOURCES}={wrong}"
    assert f"tileconform: {named}: not FlashInfer's sources (" in error
    assert "it must name a folder laid out like flashinfer/data" in error


def test_a_sources_folder_that_is_not_there(host: pytest.Pytester) -> None:
    missing = host.path / "no-such-folder"
    args = ("--tile-flashinfer-sources", str(missing), "-q")
    error = short_refusal(host.runpytest("--tile-matrix", "m.yaml", *args, *QUIET))
    assert f"--tile-flashinfer-sources {missing}: no such folder" in error


def test_flashinfer_not_installed_is_one_line(host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_tileconform.flashinfer import environment, sources

    def not_installed() -> Path:
        raise sources.FlashInferSourcesError("flashinfer-python is not installed")

    monkeypatch.delenv(ENV_SOURCES)
    monkeypatch.setattr(sources, "_installed_data_dir", not_installed)
    monkeypatch.setattr(environment, "_installed_version", lambda: None)
    error = short_refusal(host.runpytest("--tile-matrix", "m.yaml", "-q", *QUIET))
    assert "FlashInfer's sources not found: flashinfer-python is not installed" in error
    assert "pip install flashinfer-python" in error and "--tile-flashinfer VERSION" in error


def test_a_virtual_device_of_another_arch_is_one_line(host: pytest.Pytester) -> None:
    """sm90 cubins cannot load on the sm120 profile (nor on an sm120 GPU): a usage error at
    startup naming both archs and the two ways out, before anything is compiled."""
    (host.path / "m.yaml").write_text(MIXED)
    result = host.runpytest("--tile-matrix", "m.yaml", "--tile-device", "virtual:sm120", *QUIET)
    error = short_refusal(result, most_lines=12)
    assert "--tile-device virtual:sm120 cannot judge sm90 cases" in error
    assert "--tile-device virtual to judge each case on its own arch's profile" in error
    assert "--tile-arch sm120" in error
    assert compiles(host) == []


def test_a_virtual_device_of_the_cases_arch_passes_that_check(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --tile-arch the same device is accepted: the next check (the toolkit) speaks."""
    (host.path / "m.yaml").write_text(MIXED)
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    args = ("--tile-device", "virtual:sm120", "--tile-arch", "sm120")
    error = short_refusal(host.runpytest("--tile-matrix", "m.yaml", *args, *QUIET), most_lines=12)
    assert "CUDA_HOME" in error and "cannot judge" not in error


@pytest.mark.parametrize("xdist", [False, True])
def test_compiles_killed_for_memory_are_one_line(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: bool
) -> None:
    """The shared unit and then each case alone are killed: one line saying so and what to
    do, once, instead of an error per case; nothing is cached."""
    monkeypatch.setenv("STAND_IN_HOST", "1")
    monkeypatch.setenv("STAND_IN_SOURCE", "KILL\n")
    args = ("--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-build-jobs", "2", *QUIET)
    result = host.runpytest_subprocess(*args, "-n", "2") if xdist else host.runpytest(*args)
    # a progress line per compile killed (under xdist both workers try each), then the one error
    error = short_refusal(result, most_lines=40 if xdist else 25)
    assert "compile(s) were killed (signal 9, likely out of memory; 2 ran at a time" in error
    assert "--tile-build-jobs 1" in error and "--tile-build-group 1" in error
    assert "FAILED" not in result.stdout.str()
    assert compiles(host)  # the compiles ran (and were killed)
    assert not list((host.path / "cache").glob("??/*/build.json"))  # nothing cached


def test_a_compile_error_stays_the_case_verdict(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed is the host's doing; a compile error is the case's: a verdict, not a refusal."""
    monkeypatch.setenv("STAND_IN_HOST", "1")
    compiler = host.path / "stand_in_nvcc.py"
    compiler.write_text(
        STAND_IN_NVCC.replace(
            'if "KILL"',
            'if "256x128x64" in text:\n    fi = os.environ["TILECONFORM_FLASHINFER_SOURCES"]\n'
            '    print(f"{fi}/cutlass/include/cute/x.hpp(1): error: too big"); sys.exit(1)\nif "KILL"',
        )
    )
    result = host.runpytest("--tile-matrix", "m.yaml", "--tile-device", "compile", *QUIET)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert result.parseoutcomes() == {"unrun": 2, "failed": 1}  # compile only: nothing ran


# -- the header ---------------------------------------------------------------------------


def prebuild(host: pytest.Pytester, case_id: str) -> None:
    """One case's entry in the cache, as the stand-in's spec makes it (its own key)."""
    command = (sys.executable, str(host.path / "stand_in_nvcc.py"), "{src}", "{out}")
    spec = BuildSpec(f"{case_id}\n", command, "stand-in", 1, case_id)
    assert BuildCache(host.path / "cache").build([spec], jobs=1)[spec.key].ok


def test_the_header_says_how_and_what_is_built(host: pytest.Pytester) -> None:
    prebuild(host, "sm90-bf16-128x64x64-c1x1x1-none")
    before = compiles(host)
    result = host.runpytest("--tile-matrix", "m.yaml", "--tile-device", "virtual", "--collect-only", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    devices, toolchain = [line for line in result.outlines if line.startswith("tileconform: ")]
    assert devices == (
        "tileconform: sm90 on the virtual device (sm90 profile, judged through launch); "
        f"build cache {host.path / 'cache'}: 1 of 3 case(s) to compile are built"
    )
    assert toolchain.startswith(f"tileconform: FlashInfer 9.9.9 from {host.path / 'fi-data'}; nvcc ")
    assert compiles(host) == before  # looked up, nothing compiled


def test_the_header_with_k_and_without_a_toolkit(
    host: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    args = ("--tile-device", "compile", "--collect-only", "-k", "128x64x64")
    result = host.runpytest("--tile-matrix", "m.yaml", *args, *QUIET)
    lines = [line for line in result.outlines if line.startswith("tileconform: ")]
    assert lines[0].startswith("tileconform: sm90 compile only; build cache ")
    assert "case(s) to compile are built (before -k/-m)" in lines[0]
    assert lines[1].endswith("; nvcc: no usable CUDA toolkit")


def test_the_header_names_a_device_that_cannot_judge_an_arch(host: pytest.Pytester) -> None:
    (host.path / "m.yaml").write_text(MIXED)
    args = ("--tile-device", "virtual:sm120", "--collect-only")
    result = host.runpytest("--tile-matrix", "m.yaml", *args, *QUIET)
    line = next(line for line in result.outlines if line.startswith("tileconform: sm90"))
    assert line.startswith(
        "tileconform: sm90 not judgeable on --tile-device virtual:sm120, "
        "sm120 on the virtual device (sm120 profile"
    )


def test_no_header_without_flashinfer_cases(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        textwrap.dedent(
            """
            from dataclasses import replace

            from pytest_tileconform.flashinfer.axes import KIND

            class Other:
                name = "other"
                def prepare(self, cases): pass
                def judge(self, case): raise AssertionError
            def pytest_tileconform_case_kinds():
                return [replace(KIND, backend="other")]  # a matrix written as FlashInfer's
            def pytest_tileconform_register_backends(config):
                return [Other()]
            """
        )
    )
    (pytester.path / "m.yaml").write_text(MATRIX.replace("flashinfer-cutlass-moe", "other"))
    result = pytester.runpytest("--tile-matrix", "m.yaml", "--collect-only", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert not [line for line in result.outlines if line.startswith("tileconform: ")]
