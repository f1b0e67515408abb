"""A weight-only case on the GPU (SM90 fpA_intB): the harness run on the exact family's operands,
D checked against the reference bit for bit (:mod:`.weight_only`), the full-mantissa family in a
second run checked against its bound, then the graph replays and the repeats the first run made,
each D compared with the checked one bit for bit (the exact family's sums do not depend on the
order a stream-K fixup adds in, so any change is the kernel's).

The stages are judged in their order: a case whose checked run is wrong fails at ``numerics``
even when a later stage also went wrong. torch is imported with this module, which the backend
imports only to judge on a GPU.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..compile.cache import BuildResult
from ..core.devices import Gpu
from ..flashinfer.hardware import gpu_device
from ..flashinfer.numerics.full import EXACT, FULL
from ..flashinfer.numerics.tolerance import compare
from ..matrix.cases import Case
from ..verdict import Stage, Verdict
from .axes import DenseAxes
from .report import DenseReport
from .weight_only import expected, make_inputs, operand_files, read_d

#: graph replays and repeats of the checked run (as the MoE backend's defaults)
GRAPH_REPLAYS = 3
REPEATS = 3
#: the seeds of the two families' operands, fixed so that a verdict can be reproduced
SEED = {EXACT: 35, FULL: 36}


def _run(built: BuildResult, run_dir: Path, args: list[str], timeout: float) -> DenseReport:
    """The harness on ``run_dir``'s operands; what it decided (a run that decided nothing is the
    harness's fault: RuntimeError, no verdict)."""
    with built.running() as executable:
        try:
            done = subprocess.run(
                [str(executable), str(run_dir), *args], capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return DenseReport(
                {"outcome": "threw", "message": f"Failed to run: timed out after {timeout:g} s"}
            )
    report = DenseReport.read(run_dir)
    if not report.final:
        raise RuntimeError(
            f"the fpA_intB harness decided nothing (exit {done.returncode}): {done.stderr[-2000:]}"
        )
    return report


def judge_on_gpu(
    case: Case[DenseAxes], built: BuildResult, args: tuple[str, ...], gpu: Gpu, timeout: float
) -> Verdict:
    m, n, k, group = (int(a) for a in args)
    judged = [Stage.NUMERICS, Stage.GRAPH, Stage.REPEAT]
    extra: dict[str, Any] = {"graph_replays": GRAPH_REPLAYS, "repeats": REPEATS, "group_size": group}

    def verdict(
        stage: Stage | None, status: str = "", detail: str = "", workspace: int | None = None
    ) -> Verdict:
        return Verdict(
            stage,
            judged[-1],
            f"hardware ({gpu.name})",
            status=status,
            detail=detail,
            workspace_bytes=workspace,
            extra=extra,
            device=gpu_device(gpu),
        )

    def launcher_refused(report: DenseReport, family: str) -> Verdict:
        if report.stage is None:
            raise RuntimeError(
                f"the launcher threw outside CUTLASS's steps ({family} family): {report.message}"
            )
        return verdict(
            report.stage, report.status, f"{family} family: {report.message}", report.workspace_bytes
        )

    with tempfile.TemporaryDirectory(prefix="tileconform-dense-gpu-") as tmp:
        runs = {}
        for family in (EXACT, FULL):
            run_dir = Path(tmp) / family
            run_dir.mkdir()
            inputs = make_inputs(case.act, case.weight, case.out, (m, n, k), group, family, SEED[family])
            for name, data in operand_files(inputs).items():
                (run_dir / name).write_bytes(data)
            replays = (str(GRAPH_REPLAYS), str(REPEATS)) if family == EXACT else ("0", "0")
            report = _run(built, run_dir, [str(m), str(n), str(k), str(group), "check", *replays], timeout)
            if not report.passed:
                return launcher_refused(report, family)
            stages = report.fields.get("stages")
            if not isinstance(stages, dict):
                raise RuntimeError(f"the fpA_intB harness reported no stages: {report.fields}")
            if stages.get("run"):
                return verdict(
                    Stage.RUN,
                    str(stages["run"]),
                    f"{family} family: the kernel faulted",
                    report.workspace_bytes,
                )
            numerics = compare(read_d((run_dir / "d.bin").read_bytes(), case.out, m, n), expected(inputs))
            extra[f"numerics_{family}" if family == FULL else "numerics"] = numerics.summary()
            if not numerics.ok:
                detail = ("full-mantissa inputs: " if family == FULL else "") + numerics.summary()
                return verdict(Stage.NUMERICS, "mismatch", detail, report.workspace_bytes)
            runs[family] = (report, stages)
        report, stages = runs[EXACT]
        for stage in (Stage.GRAPH, Stage.REPEAT):
            fields = stages.get(stage.value)
            if not isinstance(fields, dict):
                raise RuntimeError(f"the fpA_intB harness reported no {stage.value} stage: {stages}")
            extra[stage.value] = fields
            if fields.get("error"):
                return verdict(stage, "error", str(fields["error"]), report.workspace_bytes)
            if fields.get("changed_runs"):
                detail = (
                    f"{fields['changed_runs']} of {fields['runs']} runs changed D (at most "
                    f"{fields['most_changed']} elements) from the checked run's"
                )
                return verdict(stage, "changed", detail, report.workspace_bytes)
        return verdict(None, workspace=report.workspace_bytes)
