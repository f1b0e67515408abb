"""Running a program built against vcudart on a virtual device, and reading what it decided.

:func:`run_virtual` writes the profile and the kernel table next to the run, runs the program
with the runtime's environment variables set and returns the parsed call log together with the
harness's ``verdict.json``. :func:`verdict_of` turns that into a
:class:`~pytest_tileconform.verdict.Verdict` that is judged through ``launch``: no kernel ran,
so a virtual ``pass`` means "every host-side stage accepted the case and the launch was
accepted", and ``d.bin`` must not be compared.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..verdict import Stage, Verdict
from .profiles import ArchProfile
from .resources import kernel_table, read_images

ENV_PROFILE = "TILECONFORM_VIRTUAL_PROFILE"
ENV_KERNELS = "TILECONFORM_VIRTUAL_KERNELS"
ENV_LOG = "TILECONFORM_VIRTUAL_LOG"

LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "<<<>>>")
# harness.cu's stage names that are verdicts about the kernel configuration
HARNESS_STAGES = {s.value: s for s in (Stage.CAN_IMPLEMENT, Stage.INITIALIZE, Stage.LAUNCH)}


@dataclass
class VirtualRun:
    """What happened when a program ran on the virtual device."""

    returncode: int | None  # None: killed by the timeout
    stdout: str
    stderr: str
    image: str  # the fat binary image the virtual driver chose ("sm_90a", "none", ...)
    log: list[dict[str, Any]] = field(default_factory=list)  # one record per runtime call
    verdict: dict[str, Any] | None = None  # the harness's verdict.json, if it wrote one

    def calls(self, *names: str) -> list[dict[str, Any]]:
        return [r for r in self.log if r.get("call") in names]

    @property
    def refusals(self) -> list[dict[str, Any]]:
        """Calls that failed, in order (cudaGetLastError only reports earlier ones)."""
        ok = ("cudaSuccess", "CUDA_SUCCESS")
        return [
            r
            for r in self.log
            if r.get("result") not in ok
            and r.get("call") != "cudaGetLastError"
            and r.get("call") != "cudaPeekAtLastError"
        ]

    @property
    def launches(self) -> list[dict[str, Any]]:
        return self.calls(*LAUNCH_CALLS)

    @property
    def tensor_maps(self) -> list[dict[str, Any]]:
        return self.calls("cuTensorMapEncodeTiled")

    @property
    def smem_attribute(self) -> dict[str, Any] | None:
        """The last cudaFuncSetAttribute(MaxDynamicSharedMemorySize) call: what the launcher
        asked for (``value``), the limit checked (``limit``) and the answer (``result``)."""
        calls = [
            r
            for r in self.calls("cudaFuncSetAttribute")
            if r.get("attr_name") == "MaxDynamicSharedMemorySize"
        ]
        return calls[-1] if calls else None


def _read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_virtual(
    executable: Path, args: list[str], run_dir: Path, profile: ArchProfile, timeout: float = 120.0
) -> VirtualRun:
    """Run ``executable args...`` on ``profile``'s virtual device; files go to ``run_dir``.

    Writes ``run_dir/virtual_profile.txt``, ``virtual_kernels.txt`` (from the executable's own
    cubins, for the image this device would load) and ``virtual_log.jsonl``.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    profile_path = profile.write(run_dir / "virtual_profile.txt")
    table = kernel_table(read_images(executable), profile.sm)
    kernels_path = run_dir / "virtual_kernels.txt"
    kernels_path.write_text(table)
    log_path = run_dir / "virtual_log.jsonl"
    log_path.unlink(missing_ok=True)
    env = {
        **os.environ,
        ENV_PROFILE: str(profile_path),
        ENV_KERNELS: str(kernels_path),
        ENV_LOG: str(log_path),
    }
    try:
        proc = subprocess.run(
            [str(executable), *args], capture_output=True, text=True, env=env, timeout=timeout
        )
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout, stderr = None, str(exc.stdout or ""), str(exc.stderr or "")
    verdict_path = run_dir / "verdict.json"
    try:
        verdict = json.loads(verdict_path.read_text())
    except (OSError, ValueError):
        verdict = None
    image = table.splitlines()[0].removeprefix("image ")
    return VirtualRun(returncode, stdout, stderr, image, _read_log(log_path), verdict)


def verdict_of(run: VirtualRun, source: str) -> Verdict:
    """The case's Verdict from a virtual harness run (see module docstring).

    Only the harness stages that speak about the kernel configuration become verdicts
    (can_implement, initialize, launch, pass); anything else (bad inputs, a crash, an exception
    outside CUTLASS) is raised as RuntimeError, because it is a fault of the harness or the
    virtual runtime, not a property of the case.
    """
    report = run.verdict
    if report is None or not report.get("final"):
        raise RuntimeError(
            f"virtual harness gave no final verdict (exit {run.returncode}): {run.stderr[-2000:]}"
        )
    smem = run.smem_attribute
    extra: dict[str, Any] = {
        "virtual_image": run.image,
        "virtual_refusals": run.refusals,
        "launches": len(run.launches),
        "tensor_maps": len(run.tensor_maps),
    }
    if report.get("cuda_error"):
        extra["cuda_error"] = report["cuda_error"]
    common: dict[str, Any] = {
        "judged_through": Stage.LAUNCH,
        "source": source,
        "smem_requested": report.get("smem_requested"),
        "smem_limit": smem.get("limit") if smem else None,
        "workspace_bytes": report.get("workspace_bytes"),
        "extra": extra,
    }
    stage = report.get("stage")
    if stage == "pass":
        return Verdict(None, **common)
    if stage in HARNESS_STAGES:
        # A refused cuTensorMapEncodeTiled decides nothing by itself (CuTe only prints it; its
        # assert is compiled out with NDEBUG), and CUTLASS's SM120 ptr-array mainloop encodes
        # placeholder descriptors with a NULL address: the refusals of calls CUTLASS checks
        # (cudaFuncSetAttribute, launches) come first, so they lead the detail.
        ordered = sorted(run.refusals, key=lambda r: r.get("call") == "cuTensorMapEncodeTiled")
        reasons = Counter(f"{r['call']}: {r.get('reason', r.get('result'))}" for r in ordered)
        detail = "; ".join(f"{text} (x{n})" if n > 1 else text for text, n in reasons.items())
        return Verdict(
            HARNESS_STAGES[stage],
            status=report.get("status", ""),
            detail=detail or report.get("message", ""),
            **common,
        )
    launch_refusals = [r for r in run.refusals if r.get("call") in LAUNCH_CALLS]
    if stage == "run" and launch_refusals:  # a refused launch the launcher did not check itself
        return Verdict(
            Stage.LAUNCH,
            status=report.get("status", ""),
            detail=str(launch_refusals[0].get("reason", "")),
            **common,
        )
    raise RuntimeError(
        f"virtual harness stopped at {stage!r}: {report.get('status')}: {report.get('message')}"
    )
