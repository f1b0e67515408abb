"""A pytest plugin for testing the plugin on a GPU: ``--tile-inject-fault CASE_ID[=KIND]`` makes
that case's harness load a hook library (``harness/tileconform_hook.h``) that injects a fault
(``tileconform_faults_hook.cu`` beside this file, built once per session with the CUDA
toolkit's nvcc), through problem.txt's ``hook PATH KIND`` line. The faults and the stage each
must fail at:

==================  ===========================================================================
trap (default)      run: a sticky error; the cases after it get a new runner and still pass
uninit-workspace    numerics: D computed from workspace memory nobody wrote (the poison shows)
unwritten-d         numerics: D left as it was before the run
race                graph (or repeat without graphs): a second kernel writes D racing the GEMM
workspace-race      sequence (with the graph and repeat stages off): a second kernel keeps
                    overwriting the CUTLASS workspace while each GEMM after the checked run
                    reads it, as FlashInfer's GEMM 1 and GEMM 2 share it
pending-error       prepare: a pending non-sticky error before the case is cleared, recorded and
                    fails the case (the state it would run in is not clean)
pending-after       run: the same error left after the case's last stage fails the case
scale-d             numerics: every element of D, in the case's output type, 1% larger (a value
                    changed, not poisoned), after each GEMM of both input families
==================  ===========================================================================

Not part of the package: load it with ``-p tileconform_faults`` and this folder on PYTHONPATH.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pytest_tileconform.flashinfer.axes import MoeCase
from pytest_tileconform.flashinfer.codegen import HARNESS_DIR
from pytest_tileconform.flashinfer.sources import find_cuda_home

#: The faults the hook library knows, and the stage a case with each must end at ("pass": none).
FAULTS = {
    "trap": "run",
    "uninit-workspace": "numerics",
    "unwritten-d": "numerics",
    "race": "graph",
    "workspace-race": "sequence",
    "pending-error": "prepare",
    "pending-after": "run",
    "scale-d": "numerics",
}
HOOK_SOURCE = Path(__file__).with_name("tileconform_faults_hook.cu")
LIBRARY = "libtileconform_faults.so"
_LIBRARY_KEY = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("tileconform").addoption(
        "--tile-inject-fault",
        action="append",
        default=[],
        metavar="CASE_ID[=KIND]",
        help=f"inject a fault into this case's run (repeatable; a test plugin): {', '.join(FAULTS)} "
        "(default trap)",
    )


def injected(config: pytest.Config) -> dict[str, str]:
    """Case id -> fault, from the options; an unknown fault is a usage error."""
    faults: dict[str, str] = {}
    for spec in config.getoption("tile_inject_fault"):
        case_id, _, kind = spec.partition("=")
        kind = kind or "trap"
        if kind not in FAULTS:
            raise pytest.UsageError(
                f"--tile-inject-fault {spec}: unknown fault {kind!r}; known: {', '.join(FAULTS)}"
            )
        faults[case_id] = kind
    return faults


def pytest_configure(config: pytest.Config) -> None:
    injected(config)  # a bad value stops the session before anything is built


def hook_library(config: pytest.Config) -> Path:
    """The hook library, built on first use into this session's temporary folder."""
    if _LIBRARY_KEY not in config.stash:
        folder = Path(tempfile.mkdtemp(prefix="tileconform-faults-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        library = folder / LIBRARY
        command = [
            str(find_cuda_home() / "bin" / "nvcc"),
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "--cudart=static",
            "-gencode=arch=compute_90,code=[sm_90,compute_90]",
            "-I",
            str(HARNESS_DIR),
            str(HOOK_SOURCE),
            "-o",
            str(library),
        ]
        subprocess.run(command, check=True, capture_output=True)
        config.stash[_LIBRARY_KEY] = library
    return config.stash[_LIBRARY_KEY]


def pytest_tileconform_before_run(config: pytest.Config, case: MoeCase, run_dir: Path) -> None:
    kind = injected(config).get(case.id)
    if kind is not None:
        arg = f"{kind}:{case.out}" if kind == "scale-d" else kind  # the hook needs D's type
        with (run_dir / "problem.txt").open("a") as handle:
            handle.write(f"hook {hook_library(config)} {arg}\n")
