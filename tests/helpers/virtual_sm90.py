"""One plugin run, as users run it, that judges on the virtual sm90 device the real FlashInfer
cases the integration tests compare with the H200: the smoke matrix's shared-unit cases
(tests/integration/test_e2e_virtual.py) and a few failing cases of sm90-failures.yaml
(tests/integration/test_failures_fidelity.py). All are bf16 on SM90, so the planner builds them
as one shared translation unit: one compile (its harness, probe and host builds once) where two
runs of their own compiled two units. Every test that needs them runs this same command into the
same cache, kept between runs: the first compiles, the others find the unit built (or wait on its
build lock), whichever order xdist gives them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_tileconform.compile.cache import default_cache_dir

from .paths import REPO

SMOKE = "matrices/smoke-sm90.yaml"
FAILURES = "matrices/sm90-failures.yaml"
#: Two cases of the smoke matrix with different tiles, fusions and swap_ab (one dtype)
SMOKE_CASES = ("sm90-bf16-128x128x64-c1x1x1-none", "sm90-bf16-128x16x64-c1x1x1-finalize-swapab")
#: A cluster of 32 refused at launch, a problem whose A rows of 200 bytes break TMA's 16-byte
#: global stride rule, which the virtual device predicts to fault at run, and a finalize D of
#: 200-byte rows, which it predicts to be wrong (numerics) without running anything. -k matches
#: substrings: it also selects the cases whose ids extend these (k100e, n100t1), of the same
#: kernels.
FAILURE_CASES = (
    "sm90-bf16-128x128x64-c8x4x1-none",
    "sm90-bf16-128x128x64-c1x1x1-finalize-k100",
    "sm90-bf16-128x128x64-c1x1x1-finalize-n100",
)
#: a cache of these cases' own, kept between runs: in the suite's cache one of the cases may
#: already have been built by another unit, and then the others would be built without it
UNIT_CACHE = default_cache_dir().with_name(f"{default_cache_dir().name}-e2e-shared-unit")


def judge_on_virtual_sm90(report: Path) -> dict[str, dict[str, Any]]:
    """The results file's cases of one virtual-device run over both matrices, by case id (each
    matrix's cases selected by its file name: a smoke id is a prefix of failure cases' ids)."""

    def either(ids: tuple[str, ...]) -> str:
        return "(" + " or ".join(ids) + ")"

    select = f"(smoke and {either(SMOKE_CASES)}) or (failures and {either(FAILURE_CASES)})"
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            "--tile-matrix", SMOKE, "--tile-matrix", FAILURES, "--tile-device", "virtual",
            "-k", select, "--tile-build-jobs", "1", "--tile-cache-dir", str(UNIT_CACHE),
            "--tile-report", str(report),
        ],
        cwd=REPO, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {case["id"]: case for case in json.loads(report.read_text())["cases"]}
