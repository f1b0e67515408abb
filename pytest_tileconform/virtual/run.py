"""Running a program built against vcudart on a virtual device, and the verdict it leads to.

:func:`run_virtual` writes the profile and the kernel table next to the run, runs the program
with the runtime's environment variables set and returns the parsed call log: every runtime call,
the refusals among them, the launches, the shared-memory attribute asked for, and the image the
device chose. What the program itself decided is the program's business, in a format its
backend owns; the backend reads it and hands it over as a :class:`HarnessDecision`.
:func:`verdict_of` turns both into a :class:`~pytest_tileconform.verdict.Verdict` that is judged
through ``launch``: no kernel ran, so a virtual ``pass`` means "every host-side stage accepted
the case and the launch was accepted", and the output must not be compared. The exception is
what the host can decide (:mod:`.faults`): a launch the device accepted whose kernel would fault
by a named rule is a ``run`` failure, and one whose kernel would write a wrong D by a named rule
a predicted ``numerics`` failure, both still judged through ``launch`` and naming the rule.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..verdict import Device, Stage, Verdict
from .faults import RunFault
from .profiles import ArchProfile
from .resources import kernel_table, read_images

ENV_PROFILE = "TILECONFORM_VIRTUAL_PROFILE"
ENV_KERNELS = "TILECONFORM_VIRTUAL_KERNELS"
ENV_LOG = "TILECONFORM_VIRTUAL_LOG"

LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "<<<>>>")
#: The stages whose refusal the virtual device answers for: the host-side ones. A harness that
#: stops at ``run`` decided nothing here unless a launch was refused (no kernel runs).
HOST_STAGES = (Stage.CAN_IMPLEMENT, Stage.INITIALIZE, Stage.LAUNCH)


class HarnessDecision(Protocol):
    """What the harness program decided about its case, as its backend read it from the run."""

    @property
    def final(self) -> bool:
        """The harness reached a verdict of its own (it was not ended halfway)."""
        ...  # pragma: no cover

    @property
    def name(self) -> str | None:
        """The harness's own name for where it stopped, for messages."""
        ...  # pragma: no cover

    @property
    def passed(self) -> bool: ...  # pragma: no cover

    @property
    def stage(self) -> Stage | None:
        """The stage the case failed at; None if it passed or the harness failed on its own."""
        ...  # pragma: no cover

    @property
    def outside_cutlass(self) -> bool:
        """The launcher's own checks refused the case, not CUTLASS's host code: on a virtual
        device that may be the runtime's doing, so it is no verdict here."""
        ...  # pragma: no cover

    @property
    def status(self) -> str: ...  # pragma: no cover

    @property
    def message(self) -> str: ...  # pragma: no cover

    @property
    def smem_requested(self) -> int | None: ...  # pragma: no cover

    @property
    def workspace_bytes(self) -> int | None: ...  # pragma: no cover

    @property
    def cuda_error(self) -> Any:
        """The first failed CUDA call the harness saw, if any (recorded as it is)."""
        ...  # pragma: no cover

    def describe(self) -> str:
        """Its status and message as one line, for an error that is no verdict."""
        ...  # pragma: no cover


@dataclass
class VirtualRun:
    """What happened when a program ran on the virtual device."""

    returncode: int | None  # None: killed by the timeout
    stdout: str
    stderr: str
    image: str  # the fat binary image the virtual driver chose ("sm_90a", "none", ...)
    log: list[dict[str, Any]] = field(default_factory=list)  # one record per runtime call

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
    image = table.splitlines()[0].removeprefix("image ")
    return VirtualRun(returncode, stdout, stderr, image, _read_log(log_path))


def verdict_of(
    run: VirtualRun,
    decision: HarnessDecision,
    source: str,
    device: Device | None = None,
    fault: RunFault | None = None,
) -> Verdict:
    """The case's Verdict from a virtual harness run and what the harness decided (see module
    docstring). ``fault``: what the backend found the kernel would do wrong when it runs
    (:mod:`.faults`: a fault or a wrong D, at its stage); it decides a case every host-side
    stage accepted.

    Only the harness stages that speak about the kernel configuration become verdicts
    (can_implement, initialize, launch, pass); anything else (bad inputs, a crash, an exception
    outside CUTLASS) is raised as RuntimeError, because it is a fault of the harness or the
    virtual runtime, not a property of the case.
    """
    if not decision.final:
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
    for key, name in (("cluster", "launch_clusters"), ("preferred_cluster", "preferred_clusters")):
        # what the launches gave: a dynamic-CGA kernel's preferred cluster is its runtime one,
        # its cluster the fallback (cutlass/cluster_launch.hpp)
        found = [tuple(r[key]) for r in run.launches if key in r]
        if found:
            extra[name] = [list(c) for c in dict.fromkeys(found)]
    if decision.cuda_error:
        extra["cuda_error"] = decision.cuda_error
    common: dict[str, Any] = {
        "judged_through": Stage.LAUNCH,
        "source": source,
        "smem_requested": decision.smem_requested,
        "smem_limit": smem.get("limit") if smem else None,
        "workspace_bytes": decision.workspace_bytes,
        "extra": extra,
        "device": device,
    }
    stage = decision.stage
    if decision.passed and fault is not None:
        extra["run_rule"] = fault.rule
        return Verdict(fault.stage, status=fault.status, detail=f"{fault.rule}: {fault.detail}", **common)
    if decision.passed:
        return Verdict(None, **common)
    if stage in HOST_STAGES and not decision.outside_cutlass:
        # A refused cuTensorMapEncodeTiled decides nothing by itself (CuTe only prints it; its
        # assert is compiled out with NDEBUG): the refusals of calls CUTLASS checks
        # (cudaFuncSetAttribute, launches) come first, so they lead the detail.
        ordered = sorted(run.refusals, key=lambda r: r.get("call") == "cuTensorMapEncodeTiled")
        reasons = Counter(f"{r['call']}: {r.get('reason', r.get('result'))}" for r in ordered)
        detail = "; ".join(f"{text} (x{n})" if n > 1 else text for text, n in reasons.items())
        return Verdict(stage, status=decision.status, detail=detail or decision.message, **common)
    launch_refusals = [r for r in run.refusals if r.get("call") in LAUNCH_CALLS]
    if stage is Stage.RUN and launch_refusals:  # a refused launch the launcher did not check itself
        return Verdict(
            Stage.LAUNCH,
            status=decision.status,
            detail=str(launch_refusals[0].get("reason", "")),
            **common,
        )
    raise RuntimeError(f"virtual harness stopped at {decision.name!r}: {decision.describe()}")
