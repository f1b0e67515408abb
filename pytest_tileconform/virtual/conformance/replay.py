"""Replay the driver corpus against vcudart: the same probe, linked against the virtual runtime
and run on a profile, must print every call's line exactly as the real driver did.

Nothing is tolerated but what :data:`NORMALISED` names: header fields that describe the machine
rather than a decision. Those are shown side by side in every report, never compared.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...compile.hostbuild import build_once, run_tool
from ..build import build_runtime
from ..profiles import ArchProfile
from ..run import run_virtual
from .record import PROBE_FLAGS, PROBE_SOURCE

#: The corpus recorded on an H200 by lab/gpu-driver-corpus.sh.
CORPUS = Path(__file__).resolve().parent / "driver-corpus-h200.jsonl.gz"

#: Header fields that legitimately differ between the GPU host and a replay, and why.
NORMALISED = {
    "gpu": "the virtual device's name is its profile's",
    "driver_version": "the virtual driver answers its profile's nominal version",
    "runtime_version": "the CUDA runtime the probe was built with on each machine",
    "nvcc": "the compiler on each machine (another may change kernel resources; those lines then differ)",
}

Row = dict[str, Any]


class CorpusError(ValueError):
    """The corpus file cannot be read as a corpus; the message names the file and the line."""


@dataclass(frozen=True)
class Mismatch:
    index: int
    call: str
    args: Any
    driver: Row | None  # the result fields the driver gave; None: no such line
    virtual: Row | None

    def __str__(self) -> str:
        args = json.dumps(self.args)
        return f"#{self.index} {self.call} {args}: driver {self.driver} vs vcudart {self.virtual}"


@dataclass
class Replay:
    calls: int
    header: list[tuple[str, Any, Any]] = field(default_factory=list)  # compared header fields that differ
    normalised: list[tuple[str, Any, Any]] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.header and not self.mismatches

    def report(self, limit: int = 60) -> str:
        lines = [f"{self.calls} calls, {len(self.mismatches)} differ"]
        lines += [
            f"  normalised {key}: driver {a!r}, vcudart {b!r} ({NORMALISED[key]})"
            for key, a, b in self.normalised
        ]
        lines += [f"  header {key}: driver {a!r}, vcudart {b!r}" for key, a, b in self.header]
        lines += [f"  {m}" for m in self.mismatches[:limit]]
        if len(self.mismatches) > limit:
            lines.append(f"  ... and {len(self.mismatches) - limit} more")
        return "\n".join(lines)


def parse(text: str, where: str) -> tuple[Row, list[Row]]:
    """The header and the call lines of probe output."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}:{number}: not JSON ({exc}): {line[:200]!r}") from None
    if not rows or not isinstance(rows[0].get("header"), dict):
        raise CorpusError(f"{where}: the first line is not the probe's header")
    return rows[0]["header"], rows[1:]


def read_corpus(path: Path) -> tuple[Row, list[Row]]:
    try:
        text = gzip.decompress(path.read_bytes()).decode()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the corpus: {exc}") from None
    return parse(text, str(path))


def compare(driver: tuple[Row, list[Row]], virtual: tuple[Row, list[Row]]) -> Replay:
    """Every call line and every header field but the normalised ones must be equal."""
    (dh, drows), (vh, vrows) = driver, virtual
    replay = Replay(calls=len(drows))
    for key in sorted(set(dh) | set(vh)):
        pair = (key, dh.get(key), vh.get(key))
        if key in NORMALISED:
            replay.normalised.append(pair)
        elif pair[1] != pair[2]:
            replay.header.append(pair)
    by_index = {row.get("i"): row for row in vrows}
    for row in drows:
        other = by_index.pop(row["i"], None)
        if other != row:
            replay.mismatches.append(_mismatch(row, other))
    replay.mismatches += [_mismatch(None, row) for row in by_index.values()]
    return replay


def _results(row: Row | None) -> Row | None:
    return None if row is None else {k: v for k, v in row.items() if k not in ("i", "call", "args")}


def _mismatch(driver: Row | None, virtual: Row | None) -> Mismatch:
    row = driver if driver is not None else virtual
    assert row is not None
    args = row.get("args")
    if driver is not None and virtual is not None and virtual.get("args") != args:
        args = {"driver": args, "vcudart": virtual.get("args")}
    return Mismatch(int(row.get("i", -1)), str(row.get("call")), args, _results(driver), _results(virtual))


def build_probe(cache_dir: Path, cuda_home: Path) -> Path:
    """The probe linked against vcudart, built once per (probe, runtime, nvcc)."""
    runtime = build_runtime(cache_dir, cuda_home)
    nvcc = cuda_home / "bin" / "nvcc"
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout

    def produce(directory: Path) -> None:
        out = directory / "probe"
        run_tool(
            [str(nvcc), *PROBE_FLAGS, "-o", str(out), str(PROBE_SOURCE), "--cudart=none", str(runtime)],
            "building the probe",
        )

    inputs = (
        PROBE_SOURCE.read_bytes(),
        runtime.read_bytes(),
        version.encode(),
        " ".join(PROBE_FLAGS).encode(),
    )
    return build_once(cache_dir, "driver-probe", inputs, "probe", produce)


def run_probe(probe: Path, header: Row, run_dir: Path, profile: ArchProfile) -> tuple[Row, list[Row]]:
    """The probe's lines on ``profile``, for the calls ``header`` names (seed and count)."""
    run = run_virtual(probe, [str(header["seed"]), str(header["generated"])], run_dir, profile, timeout=600)
    if run.returncode != 0:
        raise CorpusError(
            f"the probe failed on the virtual device (status {run.returncode}):\n{run.stderr[-4000:]}"
        )
    return parse(run.stdout, f"probe on virtual {profile.arch}")
