"""What a stand-in for the hardware harness answers: the GPU it names, a passing verdict.json's
fields, and a sanitizer that must not be asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_tileconform.compile.cache import BuildResult
from pytest_tileconform.core.devices import Gpu
from pytest_tileconform.flashinfer.sanitizer import SanitizerRun

GPU = Gpu(index="0", uuid="GPU-stand-in", name="NVIDIA H200", sm=90, driver="0")


def passed(**fields: Any) -> dict[str, Any]:
    return {"final": True, "stage": "pass", "status": "Success", "kernel_ms": 0.0125, **fields}


def no_sanitizer(_build: BuildResult, _run_dir: Path, _name: str) -> SanitizerRun:
    raise AssertionError("the sanitize stage was not asked for")
