"""GPUs on this host, counted without initializing CUDA, and one GPU per pytest-xdist worker."""

from __future__ import annotations

import os
import re
from pathlib import Path

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def visible_gpus(environ: dict[str, str] | None = None, proc: Path = NVIDIA_PROC) -> list[str]:
    """The GPU indices CUDA would see, as strings, honouring CUDA_VISIBLE_DEVICES.

    Counting through the driver's /proc entries keeps CUDA uninitialized in the pytest
    controller, so workers can still be pinned before they touch CUDA.
    """
    env = os.environ if environ is None else environ
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is not None:
        return [d for d in re.split(r"\s*,\s*", mask.strip()) if d and d != "-1"]
    try:
        count = sum(1 for _ in proc.iterdir())
    except OSError:
        return []
    return [str(i) for i in range(count)]


def gpu_for_worker(worker_id: str, gpus: list[str]) -> str | None:
    """``gw3`` with GPUs ['0', '1'] -> '1': workers are dealt round-robin over the GPUs."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if not match or not gpus:
        return None
    return gpus[int(match.group(1)) % len(gpus)]
