"""A pytest plugin for testing the plugin on a GPU: ``--tile-inject-fault CASE_ID`` makes that
case's harness run a kernel that executes ``__trap()`` after the GEMM (the harness's
``inject_fault trap`` input, ``harness/harness.cu``), so a run shows that a case that traps costs
only its own verdict and the cases after it still pass.

Not part of the package: load it with ``-p tileconform_faults`` and this folder on PYTHONPATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tileconform.matrix.cases import Case

#: The line the harness reads from problem.txt (``harness.cu``'s ``read_problem``).
FAULT_LINE = "inject_fault trap\n"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("tileconform").addoption(
        "--tile-inject-fault",
        action="append",
        default=[],
        metavar="CASE_ID",
        help="make this case's kernel trap after its GEMM (repeatable; a test plugin)",
    )


def pytest_tileconform_before_run(config: pytest.Config, case: Case, run_dir: Path) -> None:
    if case.id in config.getoption("tile_inject_fault"):
        with (run_dir / "problem.txt").open("a") as handle:
            handle.write(FAULT_LINE)
