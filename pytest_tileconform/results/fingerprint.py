"""What a results file needs to say about the machine its verdicts came from.

``host_fingerprint()`` is written into every ``--tile-report`` (``host.fingerprint``): GPU names,
compute capabilities, opt-in shared memory, driver and CUDA versions from ``nvidia-smi`` (absent
on machines without a GPU), the nvcc that compiled the harnesses and the FlashInfer version
(from the distribution metadata: nothing here imports ``flashinfer`` or initializes CUDA).

``device_key()`` is the per-case fingerprint ``report merge`` keys its rows on. It takes what the
verdict itself says (its source, ``extra.device``, ``smem_limit``) first and the file's host
fingerprint second, so reports written before the fingerprint existed still merge (fields they
do not carry are shown as unknown).
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..virtual.profiles import BUILTIN

UNKNOWN = "?"
NOT_APPLICABLE = "n/a"

_HARDWARE = re.compile(r"^hardware \((?P<name>.+), CC (?P<cc>\d+\.\d+)\)$")
_VIRTUAL = re.compile(r"^virtual \((?P<arch>sm\d+) profile\)$")


def _run(command: list[str]) -> str | None:
    if not shutil.which(command[0]) and not Path(command[0]).is_file():
        return None
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _gpus() -> tuple[list[dict[str, Any]], str | None]:
    """GPUs from nvidia-smi and the CUDA version its driver reports (None without a driver)."""
    out = _run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"])
    if out is None:
        return [], None
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            gpus.append({"name": parts[0], "cc": parts[1], "driver": parts[2]})
    header = _run(["nvidia-smi"]) or ""
    found = re.search(r"CUDA Version:\s*([\d.]+)", header)
    return gpus, found.group(1) if found else None


def _nvcc() -> str | None:
    """The last line of ``nvcc --version`` (e.g. ``Build cuda_13.0.r13.0/compiler.36424714_0``)."""
    try:
        from ..flashinfer.sources import FlashInferSourcesError, find_cuda_home, nvcc_build

        return nvcc_build(find_cuda_home())
    except (ImportError, FlashInferSourcesError, IndexError):
        return None


def _distribution(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def host_fingerprint() -> dict[str, Any]:
    gpus, cuda_driver = _gpus()
    return {
        "gpus": gpus,
        "driver": gpus[0]["driver"] if gpus else None,
        "cuda_driver": cuda_driver,
        "nvcc": _nvcc(),
        "flashinfer": _distribution("flashinfer-python"),
        "tileconform": _distribution("pytest-tileconform"),
    }


@dataclass(frozen=True, order=True)
class DeviceKey:
    """One row of a merged compatibility table."""

    device: str  # GPU name, "virtual sm120" or "build only"
    kind: str  # hardware | virtual | build
    cc: str
    smem_optin: str
    driver: str
    cuda: str
    flashinfer: str
    nvcc: str

    def label(self) -> str:
        if self.kind == "virtual":
            return f"{self.device} (virtual device, judged through launch)"
        if self.kind == "build":
            return f"{self.device} (compile-stage verdicts)"
        return f"{self.device} (hardware)"


def _text(value: Any) -> str:
    return UNKNOWN if value in (None, "") else str(value)


def _cuda_of_nvcc(nvcc: str | None) -> str | None:
    found = re.search(r"cuda_(\d+\.\d+)", nvcc or "")
    return found.group(1) if found else None


def device_key(verdict: dict[str, Any], host: dict[str, Any]) -> DeviceKey:
    """The fingerprint of the device that produced ``verdict`` (a ``Verdict.to_json()``)."""
    fp = host.get("fingerprint") or {}
    extra = verdict.get("extra") or {}
    source = str(verdict.get("source", ""))
    flashinfer = _text(extra.get("flashinfer") or fp.get("flashinfer"))
    nvcc = _text(fp.get("nvcc"))
    if match := _HARDWARE.match(source):
        device = extra.get("device") or {}
        smem = device.get("max_smem_per_block_optin") or verdict.get("smem_limit")
        return DeviceKey(
            device=match["name"],
            kind="hardware",
            cc=match["cc"],
            smem_optin=_text(smem),
            driver=_text(fp.get("driver")),
            cuda=_text(fp.get("cuda_driver")),
            flashinfer=flashinfer,
            nvcc=nvcc,
        )
    if match := _VIRTUAL.match(source):
        arch = match["arch"]
        profile = BUILTIN.get(arch)
        smem = verdict.get("smem_limit") or (profile.max_smem_per_block_optin if profile else None)
        cc = f"{profile.cc_major}.{profile.cc_minor}" if profile else f"{arch[2:-1]}.{arch[-1]}"
        return DeviceKey(
            device=f"virtual {arch}",
            kind="virtual",
            cc=cc,
            smem_optin=_text(smem),
            driver=NOT_APPLICABLE,
            cuda=_text(_cuda_of_nvcc(fp.get("nvcc"))),
            flashinfer=flashinfer,
            nvcc=nvcc,
        )
    # compile-stage verdicts (nvcc errors, configurations codegen cannot express, compile only)
    return DeviceKey(
        device="build only",
        kind="build",
        cc=NOT_APPLICABLE,
        smem_optin=NOT_APPLICABLE,
        driver=NOT_APPLICABLE,
        cuda=_text(_cuda_of_nvcc(fp.get("nvcc"))),
        flashinfer=flashinfer,
        nvcc=nvcc,
    )
