"""GPUs on this host, counted without initializing CUDA, and one GPU per pytest-xdist worker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..archs import arch_name

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
        count = _nvidia_smi_count()
    return [str(i) for i in range(count)]


def _nvidia_smi_count() -> int:
    """GPUs listed by ``nvidia-smi -L`` (for hosts without the driver's /proc entries)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gpu_for_worker(worker_id: str, gpus: list[str]) -> str | None:
    """``gw3`` with GPUs ['0', '1'] -> '1': workers are dealt round-robin over the GPUs."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if not match or not gpus:
        return None
    return gpus[int(match.group(1)) % len(gpus)]


@dataclass(frozen=True)
class Gpu:
    """The GPU this process would use, as the driver describes it."""

    index: str  # nvidia-smi's index, the id CUDA_VISIBLE_DEVICES pins a worker to
    uuid: str
    name: str
    sm: int  # compute capability as a number: 9.0 -> 90, 12.0 -> 120
    driver: str

    @property
    def arch(self) -> str:
        return arch_name(self.sm)

    def describe(self) -> str:
        return f"{self.name}, CC {self.sm // 10}.{self.sm % 10}"


def current_gpu() -> Gpu | None:
    """The first visible GPU, from nvidia-smi (CUDA stays uninitialized in this process)."""
    gpus = visible_gpus()
    if not gpus or not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "-i",
                gpus[0],
                "--query-gpu=index,uuid,name,compute_cap,driver_version",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    index, uuid, name, cc, driver = (field.strip() for field in out.splitlines()[0].split(","))
    major, minor = cc.split(".")
    return Gpu(index, uuid, name, int(major) * 10 + int(minor), driver)
