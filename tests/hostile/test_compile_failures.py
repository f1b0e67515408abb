"""A compile verdict means the kernel does not compile: a failed compile is classified from the
compiler's own output, and only a diagnostic of the kernel's source (the generated unit, the
release's files) is cached as the case's ``compile`` verdict. Out of memory, no disk space, a
signal, a tool missing or a failure without such a diagnostic end the session with one line
(exit 4), cache nothing, write no matrix, and the same command compiles once the cause is gone.

The plugin runs as users run it, through its real build script, ninja file and nvcc pipeline,
with a stand-in CUDA toolkit whose ``nvcc`` makes objects and programs from the unit's text, or
prints what a real nvcc prints for the cause it is told to show. Every folder involved (the
toolkit, FlashInfer's sources, the build cache) has a space, a quote, parentheses and a ``;`` in
its path, and the stand-in refuses a path it cannot find, as nvcc does, so a path split on the
way fails the run. A ``$``, a double quote or a backquote nvcc itself cannot take (it runs its
passes through a shell): such a path is one line before anything is compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.stand_in_flashinfer import MATRIX, QUIET, make_sources, short_refusal

from pytest_tileconform.compile.failure import Cause, classify
from pytest_tileconform.compile.ninja import EXIT_MARK
from pytest_tileconform.flashinfer.sources import ENV_SOURCES

# Only the toolkit's compiles are stood in for: the virtual runtime is not built (nothing runs
# in --tile-device compile) and the stand-in sources are not checked against the harness.
CONFTEST = """
import pytest
from pytest_tileconform.flashinfer.backend import FlashInferBackend

_patch = pytest.MonkeyPatch()


def pytest_configure(config):
    _patch.setattr(FlashInferBackend, "_build_runtime", lambda self: None)
    _patch.setattr(FlashInferBackend, "_incompatibility", None)


def pytest_unconfigure(config):
    _patch.undo()
"""

# nvcc as the build script and the release probe call it: --version; -cuda SOURCE -o OUT (the
# probe's host front end); --dryrun (refused: the pipeline then runs this nvcc unchanged);
# -c SOURCES -odir DIR; and the two links (OBJECTS [RUNTIME] -o OUT). STAND_IN_CAUSE makes a
# compile whose unit holds STAND_IN_ON (default: every one) fail as nvcc fails for that cause,
# STAND_IN_STATUS its exit status; a probe fails too for the causes the host is to blame for.
STAND_IN_NVCC = r"""
import os, signal, sys
from pathlib import Path

args = sys.argv[1:]
cause = os.environ.get("STAND_IN_CAUSE", "")
release = Path(os.environ["TILECONFORM_FLASHINFER_SOURCES"])


def fatal(text):
    print(f"nvcc fatal   : {text}", file=sys.stderr)
    sys.exit(1)


def value(option):
    return args[args.index(option) + 1] if option in args else None


def fail(unit):
    status = int(os.environ.get("STAND_IN_STATUS", "1"))
    where = release / "cutlass/include/cute/layout.hpp"
    if cause == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    said = {
        "oom": f"{where}(1077): catastrophic error: out of memory\n"
        f'1 catastrophic error detected in the compilation of "{unit}".\nCompilation terminated.',
        "space": "nvcc error   : Could not write to '/tmp/tmpxft_00000001_00000000-6_tu.ptx': "
        "No space left on device",
        "tool": "sh: 1: cicc: not found",
        "silent": "",
        "outside": "/usr/include/c++/12/bits/stl_algo.h(5): error: expected a declaration",
        "unit": f'{unit}(3): error: static assertion failed with "tile too big"',
        "release": f'{where}(1077): error: static assertion failed with "Stride Divisibility"',
    }[cause]
    if said:
        print(said, file=sys.stderr)
    sys.exit(status)  # nvcc under a memory limit may exit normally, having written nothing


if args == ["--version"]:
    print("Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/stand-in")
    sys.exit(0)
if "-cuda" in args:
    if cause in ("oom", "space", "signal", "tool") and not os.environ.get("STAND_IN_ON"):
        fail(value("-o"))
    Path(value("-o")).write_text("")
    sys.exit(0)
if "--dryrun" in args:
    fatal("the stand-in makes no plan")
if "-c" in args:
    sources = [Path(a) for a in args if a.endswith((".cu", ".cpp"))]
    for path in sources:
        if not path.is_file():
            fatal(f"Don't know what to do with '{path}'")
    odir = Path(value("-odir") or "")
    if not odir.is_dir():
        fatal(f"Could not open output directory '{odir}'")
    unit = next(p for p in sources if p.suffix == ".cu")
    text = unit.read_text()
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(f"compile {unit.parent.name}\n")
    if cause and os.environ.get("STAND_IN_ON", "") in text:
        fail(unit)
    for path in sources:
        (odir / (path.stem + ".o")).write_text(text if path == unit else path.name)
    sys.exit(0)

out = value("-o")
objects = [Path(a) for a in args if a.endswith(".o")]
if out is None or not objects or not all(p.is_file() for p in objects):
    fatal("No input files specified; use option --help for more information")
Path(out).write_text("".join(p.read_text() for p in objects))
"""


def _toolkit(root: Path) -> Path:
    """A folder :func:`pytest_tileconform.flashinfer.sources.find_cuda_home` takes for a CUDA 13.0 toolkit."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    for header in ("cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "cublas_v2.h"):
        (root / "include" / header).write_text("// stand-in\n")
    (root / "version.json").write_text(json.dumps({"cuda": {"version": "13.0.88"}}))
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!{sys.executable}\n{STAND_IN_NVCC}")
    nvcc.chmod(0o755)
    return root


@pytest.fixture
def kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder with the matrix (3 cases), the stand-in toolkit and FlashInfer
    sources, and a build cache, each at a path with a space, a quote, parentheses and a ``;``."""
    for var in ("CI", "CUDA_VISIBLE_DEVICES", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(var, raising=False)
    odd = "it's (a) b;c"
    monkeypatch.setenv("CUDA_HOME", str(_toolkit(pytester.path / f"cuda {odd}")))
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / f"flashinfer {odd}")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / f"build cache {odd}"))
    monkeypatch.setenv("STAND_IN_LOG", str(pytester.path / "compiles.log"))
    monkeypatch.setenv("TILECONFORM_NVCC_PIPELINE", "1")
    (pytester.path / "m.yaml").write_text(MATRIX)
    pytester.makeconftest(CONFTEST)
    return pytester


ARGS = ("--tile-matrix", "m.yaml", "--tile-device", "compile", "--tile-build-jobs", "1", *QUIET)


def compiled(kit: pytest.Pytester) -> int:
    log = kit.path / "compiles.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def cached_failures(kit: pytest.Pytester) -> list[dict[str, object]]:
    cache = Path(os.environ["TILECONFORM_CACHE_DIR"])
    entries = [json.loads(p.read_text()) for p in cache.glob("??/*/build.json")]
    return [meta for meta in entries if meta.get("ok") is False]


def test_paths_with_spaces_and_quotes_compile(kit: pytest.Pytester) -> None:
    result = kit.runpytest(*ARGS, "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert result.parseoutcomes() == {"unrun": 3}  # compile only: built, nothing ran
    assert compiled(kit) >= 1 and not cached_failures(kit)


# cause, nvcc's exit status, what the one line says
ENVIRONMENT = [
    ("oom", 4, "compile(s) ran out of memory ("),
    ("oom", 0, "compile(s) ran out of memory ("),  # nvcc under ulimit -v may exit normally
    ("space", 1, "ran out of disk space (nvcc error   : Could not write to"),
    ("signal", 1, "compile(s) were killed (signal 9, likely out of memory; 1 ran at a time"),
    ("tool", 255, "could not run a tool or read a file they need (sh: 1: cicc: not found)"),
    ("silent", 1, "failed without a diagnostic of the kernel's source (compiler failed without output)"),
    ("outside", 2, "failed without a diagnostic of the kernel's source (/usr/include/c++/12"),
]
#: what each line says to change
REMEDY = {
    "oom": "--tile-build-group 1), or with more memory (a limit such as ulimit -v",
    "space": "free space where nvcc writes its temporary files (TMPDIR, now ",
    "signal": "--tile-build-group 1), or with more memory free",
    "tool": "check the CUDA toolkit (CUDA_HOME, or nvcc on PATH)",
    "silent": "fix what that line names and rerun",
    "outside": "fix what that line names and rerun",
}


@pytest.mark.parametrize(
    ("cause", "status", "said"), ENVIRONMENT, ids=[f"{c}-exit{s}" for c, s, _ in ENVIRONMENT]
)
def test_a_compile_that_fails_for_the_host_is_one_line_and_no_verdict(
    kit: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cause: str, status: int, said: str
) -> None:
    """One line naming the cause and what to change, exit 4; nothing cached, no matrix changed
    (even with --tile-update), no verdict in the results file; the same command then compiles
    and judges once the cause is gone."""
    matrix = (kit.path / "m.yaml").read_bytes()
    monkeypatch.setenv("STAND_IN_CAUSE", cause)
    monkeypatch.setenv("STAND_IN_STATUS", str(status))
    failed = kit.runpytest(*ARGS, "--tile-update", "--tile-report", "r.json")
    error = short_refusal(failed, most_lines=30)
    assert said in error and REMEDY[cause] in error, error
    assert error.endswith("what compiled is cached, these were not")
    assert "FAILED" not in failed.stdout.str()
    assert not cached_failures(kit)
    assert (kit.path / "m.yaml").read_bytes() == matrix
    report = json.loads((kit.path / "r.json").read_text())
    assert not [case for case in report["cases"] if case.get("verdict")]
    applied = subprocess.run(
        [Path(sys.executable).parent / "tileconform", "report", "apply", "m.yaml", "r.json"],
        cwd=kit.path,
        capture_output=True,
        text=True,
    )
    assert applied.returncode == 2 and "no case of m.yaml has a verdict" in applied.stderr, applied.stderr
    before = compiled(kit)

    monkeypatch.delenv("STAND_IN_CAUSE")
    again = kit.runpytest(*ARGS, "--tile-update")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str() + again.stderr.str()
    assert again.parseoutcomes() == {"unrun": 3}
    assert compiled(kit) > before  # compiled again: nothing of the failure was kept
    assert (kit.path / "m.yaml").read_bytes() == matrix  # every case passes what it judged


@pytest.mark.parametrize(("cause", "where"), [("release", "layout.hpp(1077): error:")])
def test_a_diagnostic_of_the_kernels_source_is_its_cached_verdict(
    kit: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cause: str, where: str
) -> None:
    """An error in a file of the release fails that case at compile, is cached (the next run
    compiles nothing) and is what --tile-update records."""
    monkeypatch.setenv("STAND_IN_CAUSE", cause)
    monkeypatch.setenv("STAND_IN_ON", "256, 128, 64")  # the unit of one of the three tiles
    first = kit.runpytest(*ARGS)
    assert first.ret == pytest.ExitCode.TESTS_FAILED, first.stdout.str() + first.stderr.str()
    assert first.parseoutcomes() == {"unrun": 2, "failed": 1}
    failures = cached_failures(kit)  # the shared unit's and the case's own, compiled alone
    assert failures and all(where in str(meta["first_error"]) for meta in failures)
    before = compiled(kit)
    update = kit.runpytest(*ARGS, "--tile-update")
    assert compiled(kit) == before  # the verdict came from the cache
    assert update.ret == pytest.ExitCode.OK  # it recorded every failure of its run
    assert "stage: compile" in (kit.path / "m.yaml").read_text()


def test_an_error_in_the_generated_unit_is_the_tools_not_a_verdict(
    kit: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated unit is the tool's code (a name it wrote that the release does not declare,
    as FlashInfer 0.6.12's SafeFP4 once was): an error located there skips the case, naming the
    tool, whatever the cache's path holds (here a space, a quote and parentheses), and
    --tile-update records nothing."""
    monkeypatch.setenv("STAND_IN_CAUSE", "unit")
    monkeypatch.setenv("STAND_IN_ON", "256, 128, 64")
    matrix = (kit.path / "m.yaml").read_bytes()
    result = kit.runpytest(*ARGS, "-rs", "--tile-update")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert result.parseoutcomes() == {"unrun": 2, "skipped": 1}
    assert "the tool's harness or generated unit does not compile against FlashInfer" in result.stdout.str()
    assert (kit.path / "m.yaml").read_bytes() == matrix


@pytest.mark.parametrize(
    ("odd", "held"),
    [("$HOME", "$"), ('"', '"'), ("`x`", "`"), ("\n", "\n")],
    ids=["dollar", "double-quote", "backquote", "newline"],
)
def test_a_path_nvcc_cannot_take_is_one_line(kit: pytest.Pytester, odd: str, held: str) -> None:
    """nvcc expands ``$`` and backquotes in the paths it is given (its passes run through a
    shell, paths in double quotes), and no ninja file can hold a line break: refused before
    anything is compiled, naming the path and what to change."""
    cache = kit.path / f"cache {odd}"
    matrix = (kit.path / "m.yaml").read_bytes()
    error = short_refusal(
        kit.runpytest(*ARGS, "--tile-update", "--tile-cache-dir", str(cache)), most_lines=14
    )
    assert f"the build cache {str(cache)!r} holds {held!r}" in error, error
    assert "which a build cannot pass to nvcc (it runs its passes through a shell)" in error
    assert "point --tile-cache-dir elsewhere" in error
    assert compiled(kit) == 0 and (kit.path / "m.yaml").read_bytes() == matrix
    again = kit.runpytest(*ARGS, "--tile-update")  # the cache of the fixture: a space, a quote
    assert again.ret == pytest.ExitCode.OK, again.stdout.str() + again.stderr.str()
    assert again.parseoutcomes() == {"unrun": 3} and (kit.path / "m.yaml").read_bytes() == matrix


# -- a real nvcc under a memory limit -----------------------------------------------------

# Each unit is a small kernel (its cases named in a comment), compiled by the real nvcc through
# the plugin's cache and ninja, under ``ulimit -v $STAND_IN_ULIMIT`` when that is set.
REAL_NVCC_CONFTEST = """
import os
import pytest
from pytest_tileconform.compile.cache import BuildSpec
from pytest_tileconform.flashinfer.backend import FlashInferBackend

_patch = pytest.MonkeyPatch()
LIMITED = 'if [ -n "$STAND_IN_ULIMIT" ]; then ulimit -v "$STAND_IN_ULIMIT"; fi; exec "$@"'
KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\\nint main() { return 0; }\\n"


def _spec(self, cases, paired=None):
    nvcc = os.environ["REAL_NVCC"]
    return BuildSpec(
        source="".join(f"// {c.id}\\n" for c in cases) + KERNEL,
        command=("sh", "-c", LIMITED, "sh", nvcc, "-arch=sm_90a", "{src}", "-o", "{out}"),
        salt="real nvcc, small kernel",
        ram_bytes=1,
        label=cases[0].id,
    )


def pytest_configure(config):
    _patch.setattr(FlashInferBackend, "_spec", _spec)
    _patch.setattr(FlashInferBackend, "_build_runtime", lambda self: None)
    _patch.setattr(FlashInferBackend, "_incompatibility", None)
    _patch.setattr(FlashInferBackend, "check_environment", lambda self, cases: None)


def pytest_unconfigure(config):
    _patch.undo()
"""


@pytest.mark.slow
def test_real_nvcc_out_of_memory_is_one_line_then_compiles(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc under ``ulimit -v`` prints ``catastrophic error: out of memory`` (in whatever
    header it was reading): one line, exit 4, nothing cached, the matrix untouched by
    --tile-update; without the limit the same command compiles and judges."""
    from pytest_tileconform.flashinfer.sources import FlashInferSourcesError, find_cuda_home

    try:
        nvcc = find_cuda_home() / "bin" / "nvcc"
    except FlashInferSourcesError as exc:
        pytest.skip(f"needs nvcc: {exc}")
    for var in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("REAL_NVCC", str(nvcc))
    monkeypatch.setenv(ENV_SOURCES, str(make_sources(pytester.path / "fi-data")))
    monkeypatch.setenv("TILECONFORM_CACHE_DIR", str(pytester.path / "cache"))
    (pytester.path / "m.yaml").write_text(MATRIX)
    pytester.makeconftest(REAL_NVCC_CONFTEST)
    matrix = (pytester.path / "m.yaml").read_bytes()

    monkeypatch.setenv("STAND_IN_ULIMIT", "120000")  # KiB: nvcc's front end runs out
    error = short_refusal(pytester.runpytest(*ARGS, "--tile-update"), most_lines=30)
    assert "compile(s) ran out of memory (" in error and "out of memory" in error.split("(", 1)[1]
    assert "or with more memory (a limit such as ulimit -v" in error
    assert not list((pytester.path / "cache").glob("??/*/build.json"))
    assert (pytester.path / "m.yaml").read_bytes() == matrix

    monkeypatch.delenv("STAND_IN_ULIMIT")
    again = pytester.runpytest(*ARGS, "--tile-update")
    assert again.ret == pytest.ExitCode.OK, again.stdout.str() + again.stderr.str()
    assert again.parseoutcomes() == {"unrun": 3}
    assert (pytester.path / "m.yaml").read_bytes() == matrix


# -- what each kind of compiler output is -------------------------------------------------

RELEASE = Path("/opt/fi/data")
UNIT = Path("/cache/.build-x/0123/tu.cu")
# (what the compiler printed, its exit status, the cause); the lines are real nvcc 13.0 / gcc 12
# output where noted
OUTPUTS = [
    (
        f"{RELEASE}/cutlass/include/cute/arch/mma_sm90.hpp(370): error: static assertion failed",
        1,
        Cause.SOURCE,
    ),
    (f'{UNIT}(12): error: identifier "x" is undefined', 1, Cause.SOURCE),
    (f"{UNIT}:12:3: error: expected ';'", 1, Cause.SOURCE),  # gcc's host pass
    (
        "ptxas error   : Entry function '_Z1kv' uses too much shared data (0x10000 bytes, 0xc000 max)",
        255,
        Cause.SOURCE,
    ),
    # nvcc under ulimit -v 120000 (real): located in a system header
    (
        "/usr/include/c++/12/bits/stl_iterator_base_funcs.h(191): catastrophic error: out of memory",
        4,
        Cause.MEMORY,
    ),
    (f"{RELEASE}/cutlass/include/cute/layout.hpp(9): catastrophic error: out of memory", 0, Cause.MEMORY),
    # nvcc under ulimit -v 40000 (real)
    (
        "cc1plus: error while loading shared libraries: libgmp.so.10: "
        "failed to map segment from shared object",
        1,
        Cause.MEMORY,
    ),
    ("g++: fatal error: Killed signal terminated program cc1plus", 1, Cause.SIGNAL),
    ("nvcc error   : 'cicc' died due to signal 9 (Kill signal)", 255, Cause.SIGNAL),
    ("", 137, Cause.SIGNAL),
    ("/tmp/tmpxft_1-6_tu.cudafe1.cpp: No space left on device", 1, Cause.SPACE),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_120f'", 1, Cause.TOOL),
    ("sh: 1: g++: not found", 127, Cause.TOOL),
    (f'{UNIT}(3): catastrophic error: cannot open source file "cublas_v2.h"', 1, Cause.TOOL),
    ("/usr/include/c++/12/bits/stl_algo.h(5): error: expected a declaration", 1, Cause.UNKNOWN),
    ("ld: undefined reference to `foo'", 1, Cause.UNKNOWN),
    ("", 1, Cause.UNKNOWN),
]


@pytest.mark.parametrize(("output", "status", "cause"), OUTPUTS)
def test_what_a_failed_compile_said(output: str, status: int, cause: Cause) -> None:
    log = f"{output}\n{EXIT_MARK}{status}\n"
    found = classify(log, UNIT.parent.parent, [UNIT.parent, RELEASE])
    assert found.cause is cause, found
    assert found.environment == (cause is not Cause.SOURCE)
