"""What a results file needs to say about the machine its verdicts came from.

``host_fingerprint()`` is written into every ``--tile-report`` (``host.fingerprint``): GPU names,
compute capabilities and driver and CUDA versions from ``nvidia-smi`` (absent on machines without a
GPU) and this package's version, merged with the fields the backends contribute through
``pytest_tileconform_host_fingerprint`` (their versions, the compiler of their builds) and declare
through ``pytest_tileconform_host_columns``. Nothing here imports a backend or initializes CUDA.

``device_key()`` is the per-case fingerprint ``report merge`` keys its rows on. It takes what the
verdict itself says (its ``device``, ``extra.device``, ``smem_limit``) first and the file's host
fingerprint second, so reports written before the fingerprint existed still merge (fields they
do not carry are shown as unknown).
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .model import Fingerprint, Host, VerdictRecord

UNKNOWN = "?"
NOT_APPLICABLE = "n/a"


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


def distribution_version(name: str) -> str | None:
    """An installed distribution's version from its metadata (nothing is imported)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def host_fingerprint(contributions: Iterable[Mapping[str, Any]] = ()) -> Fingerprint:
    """This host's fingerprint: the core's part, then each backend's ``contributions`` (the
    results of ``pytest_tileconform_host_fingerprint``); a value of None adds nothing."""
    gpus, cuda_driver = _gpus()
    data: dict[str, Any] = {
        "gpus": gpus,
        "driver": gpus[0]["driver"] if gpus else None,
        "cuda_driver": cuda_driver,
        "tileconform": distribution_version("pytest-tileconform"),
    }
    for part in contributions:
        data.update({key: value for key, value in part.items() if value is not None})
    return Fingerprint.model_validate(data)


@dataclass(frozen=True)
class HostColumn:
    """A field of the host fingerprint a backend declares, shown as a column of each row of a
    merged table: the key its plugin records (``pytest_tileconform_host_fingerprint``), which a
    verdict's ``extra`` may name more exactly (the release a run judged), and the column's title.
    ``toolkit``: the value is a CUDA compiler's ``--version`` line (``... cuda_13.0 ...``), which
    rows no driver judged (a virtual device, the build) take their CUDA version from."""

    key: str
    title: str
    toolkit: bool = False


@dataclass(frozen=True, order=True)
class DeviceKey:
    """One row of a merged compatibility table."""

    device: str  # GPU name, "virtual sm120" or "build only"
    kind: str  # hardware | virtual | build
    cc: str
    smem_optin: str
    driver: str
    cuda: str
    backend: tuple[str, ...]  # the values of the backends' columns (:class:`HostColumn`)

    def label(self) -> str:
        if self.kind == "virtual":
            return f"{self.device} (virtual device, judged through launch)"
        if self.kind == "build":
            return f"{self.device} (compile-stage verdicts)"
        return f"{self.device} (hardware)"


def _text(value: Any) -> str:
    return UNKNOWN if value in (None, "") else str(value)


def _cuda_of_toolkit(version: str) -> str | None:
    found = re.search(r"cuda_(\d+\.\d+)", version)
    return found.group(1) if found else None


def _reported_optin(verdict: VerdictRecord) -> Any:
    """The opt-in shared memory the device itself reported (``extra.device``), if it did."""
    reported = verdict.extra.get("device")
    return reported.get("max_smem_per_block_optin") if isinstance(reported, dict) else None


def host_value(verdict: VerdictRecord, host: Host, key: str) -> str:
    """A backend's fingerprint field for ``verdict``: its ``extra[key]``, else the host's."""
    fp = host.fingerprint or Fingerprint()
    return _text(verdict.extra.get(key) or getattr(fp, key, None))


def device_key(verdict: VerdictRecord, host: Host, columns: Sequence[HostColumn] = ()) -> DeviceKey:
    """The fingerprint of the device that produced ``verdict``, with the backends' ``columns``. A
    verdict without a ``device`` (its backend did not say) is keyed as a build-stage one."""
    fp = host.fingerprint or Fingerprint()
    backend = tuple(host_value(verdict, host, column.key) for column in columns)
    toolkit = next((value for column, value in zip(columns, backend, strict=True) if column.toolkit), UNKNOWN)
    toolkit_cuda = _text(_cuda_of_toolkit(toolkit))
    device = verdict.device
    if device is not None and device.kind == "hardware":
        return DeviceKey(
            device=device.name,
            kind="hardware",
            cc=_text(device.cc),
            smem_optin=_text(_reported_optin(verdict) or verdict.smem_limit),
            driver=_text(fp.driver),
            cuda=_text(fp.cuda_driver),
            backend=backend,
        )
    if device is not None and device.kind == "virtual":
        return DeviceKey(
            device=device.name,
            kind="virtual",
            cc=_text(device.cc),
            smem_optin=_text(verdict.smem_limit or _reported_optin(verdict)),
            driver=NOT_APPLICABLE,
            cuda=toolkit_cuda,
            backend=backend,
        )
    # compile-stage verdicts (compile errors, configurations codegen cannot express, compile only)
    return DeviceKey(
        device="build only",
        kind="build",
        cc=NOT_APPLICABLE,
        smem_optin=NOT_APPLICABLE,
        driver=NOT_APPLICABLE,
        cuda=toolkit_cuda,
        backend=backend,
    )
