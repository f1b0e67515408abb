"""An FP8 block-scale case on the GPU (SM90 ``fp8_blockscale_gemm_sm90``): the harness run on the
exact family's operands, then on the full-mantissa family's where it applies (fp8 x fp8), each D
compared with the reference (:mod:`.blockscale_numerics`), and the graph replays and repeats of
the first run compared with it bit for bit; and what a harness run decided, on either device
(:class:`BlockScaleReport`).

The runner's messages are not CUTLASS's: DeepGEMM's dispatch asserts its own calls
(``DG_HOST_ASSERT``: the shared-memory attribute, the launch) and loads a kernel its JIT compiled
with nvcc; the built-in kernels' launches are not checked by the runner, so the harness checks
them as a caller would (``launch refused:``). :data:`STEPS` reads those into stages.

torch is imported with :func:`judge_on_gpu`'s module, which the backend imports only to judge on
a GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..compile.cache import BuildResult
from ..core.devices import Gpu
from ..flashinfer.hardware import gpu_device
from ..verdict import Stage, Verdict
from .report import DenseReport

#: (words of the runner's or the harness's message, the step's name, the stage)
STEPS: tuple[tuple[re.Pattern[str], str, Stage], ...] = (
    # DeepGEMM's JIT: nvcc left no cubin (Runtime's assert), or it holds no kernel
    (re.compile(r"isPathValid|Failed to find fp8_gemm_kernel|NVRTC", re.I), "jit", Stage.COMPILE),
    (re.compile(r"cudaFuncSetAttribute", re.I), "smem_attribute", Stage.INITIALIZE),
    (re.compile(r"launch refused|status == cudaSuccess", re.I), "launch", Stage.LAUNCH),
)
#: graph replays and repeats of the checked run (as the other hardware harnesses')
GRAPH_REPLAYS = 3
REPEATS = 3
#: the seeds of the two families' operands, fixed so that a verdict can be reproduced
SEED = {"exact": 37, "full": 38}


class BlockScaleReport(DenseReport):
    """A harness run's decision, its stage read from the runner's messages (:data:`STEPS`)."""

    def _step(self) -> tuple[str, Stage] | None:
        for words, name, stage in STEPS:
            if words.search(self.message):
                return name, stage
        return None

    @property
    def status(self) -> str:
        """The runtime's error of a built-in kernel's refused launch (DeepGEMM's asserts name none)."""
        refused = "launch refused: "
        return self.message.removeprefix(refused) if self.message.startswith(refused) else ""


def _run(
    built: BuildResult, run_dir: Path, args: list[str], env: dict[str, str], timeout: float
) -> BlockScaleReport:
    """The harness on ``run_dir``'s operands (a run that decided nothing is the harness's fault:
    RuntimeError, no verdict)."""
    with built.running() as executable:
        try:
            done = subprocess.run(
                [str(executable), str(run_dir), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, **env},
            )
        except subprocess.TimeoutExpired:
            return BlockScaleReport(
                {"outcome": "threw", "message": f"Failed to run: timed out after {timeout:g} s"}
            )
    report = BlockScaleReport(DenseReport.read(run_dir).fields)
    if not report.final:
        raise RuntimeError(
            f"the FP8 block-scale harness decided nothing (exit {done.returncode}): "
            f"{done.stdout[-1000:]} {done.stderr[-2000:]}"
        )
    return report


def judge_on_gpu(
    case: Any,
    built: BuildResult,
    args: tuple[str, ...],
    env: dict[str, str],
    gpu: Gpu,
    timeout: float,
) -> Verdict:
    from ..flashinfer.numerics.full import EXACT, FULL
    from ..flashinfer.numerics.tolerance import compare
    from .blockscale_numerics import expected, make_inputs, operand_files, read_d

    m, n, k = case.axes.mnk
    families = [EXACT, FULL] if case.act == case.weight == "fp8_e4m3" else [EXACT]
    extra: dict[str, Any] = {"graph_replays": GRAPH_REPLAYS, "repeats": REPEATS, "families": families}

    def verdict(
        stage: Stage | None, status: str = "", detail: str = "", workspace: int | None = None
    ) -> Verdict:
        return Verdict(
            stage,
            Stage.REPEAT,
            f"hardware ({gpu.name})",
            status=status,
            detail=detail,
            workspace_bytes=workspace,
            extra=extra,
            device=gpu_device(gpu),
        )

    with tempfile.TemporaryDirectory(prefix="tileconform-bscale-gpu-") as tmp:
        checked: dict[str, Any] = {}
        for family in families:
            run_dir = Path(tmp) / family
            run_dir.mkdir()
            inputs = make_inputs(
                case.act, case.weight, case.out, (m, n, k), case.axes.b_scales, family, SEED[family]
            )
            for name, data in operand_files(inputs).items():
                (run_dir / name).write_bytes(data)
            replays = (str(GRAPH_REPLAYS), str(REPEATS)) if family == EXACT else ("0", "0")
            report = _run(built, run_dir, [*args, "check", *replays], env, timeout)
            if not report.passed:
                if report.stage is None:
                    raise RuntimeError(
                        f"the runner threw outside its known steps ({family} family): {report.message}"
                    )
                return verdict(
                    report.stage, report.status, f"{family} family: {report.message}", report.workspace_bytes
                )
            stages = report.fields.get("stages")
            if not isinstance(stages, dict):
                raise RuntimeError(f"the FP8 block-scale harness reported no stages: {report.fields}")
            extra.setdefault("deepgemm_config", stages.get("config"))
            if stages.get("run"):
                return verdict(
                    Stage.RUN,
                    str(stages["run"]),
                    f"{family} family: the kernel faulted",
                    report.workspace_bytes,
                )
            numerics = compare(read_d((run_dir / "d.bin").read_bytes(), case.out, m, n), expected(inputs))
            extra["numerics" if family == EXACT else f"numerics_{family}"] = numerics.summary()
            if not numerics.ok:
                return verdict(
                    Stage.NUMERICS,
                    "mismatch",
                    f"{family} family: {numerics.summary()}",
                    report.workspace_bytes,
                )
            checked[family] = (report, stages)
        report, stages = checked[EXACT]
        for stage in (Stage.GRAPH, Stage.REPEAT):
            fields = stages.get(stage.value)
            if not isinstance(fields, dict):
                raise RuntimeError(f"the FP8 block-scale harness reported no {stage.value} stage: {stages}")
            extra[stage.value] = fields
            if fields.get("error") or fields.get("changed_runs"):
                detail = fields.get("error") or f"{fields['changed_runs']} of {fields['runs']} runs changed D"
                return verdict(
                    stage, "fault" if fields.get("error") else "changed", str(detail), report.workspace_bytes
                )
        return verdict(None, workspace=report.workspace_bytes)
