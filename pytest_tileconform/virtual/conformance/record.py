"""Build the conformance probe against the real CUDA runtime, run it to the end whatever the
driver does to it, and write the corpus.

The probe (``probe.cu``) prints one line per call and stops with status 75 after a call that
left a sticky error (its context is then useless), or dies inside a call that crashed the
process; in the second case its last line holds the call's arguments but no result. Either way
this starts it again after that call, with a fresh context, until every call has a line: the
corpus is complete or this fails. A crashed call's line is completed with ``"crash"``.

Standard library only: it runs on the GPU host before anything is installed::

    python3 pytest_tileconform/virtual/conformance/record.py OUT.jsonl.gz [NVCC]
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

PROBE_SOURCE = Path(__file__).resolve().parent / "probe.cu"
#: How the probe is compiled, on the GPU host and for the replay (which adds vcudart): one
#: sm_90a cubin, uncompressed so that vcudart's kernel table can read its resources.
PROBE_FLAGS = ("-O1", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "--no-compress")
#: The calls of the committed corpus: the generator's seed and how many calls it makes.
SEED = "20261201"
COUNT = "12000"
STICKY = 75  # the probe's status after a call that left a sticky error
MAX_RESTARTS = 500  # more means every call fails; the corpus would say nothing
RUN_TIMEOUT = 120.0  # seconds; a whole run takes well under a minute on an H200, so this is a hang


class RecordError(RuntimeError):
    """The probe could not be run to the end; the message says where it stopped and why."""


def _status(returncode: int | None) -> str:
    if returncode is None:
        return f"hung, killed after {RUN_TIMEOUT:.0f} s"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


def _run_from(probe: Path, seed: str, count: str, start: int, sink: Path) -> tuple[int | None, list[str]]:
    """One run of the probe from call ``start``; its stdout goes to ``sink`` and is returned.
    None for a run that hung past RUN_TIMEOUT (killed: the call it hung in has no result)."""
    with sink.open("wb") as out:
        try:
            proc = subprocess.run(
                [str(probe), seed, count, str(start)],
                stdout=out,
                stderr=None,
                check=False,
                timeout=RUN_TIMEOUT,
            )
            returncode: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    return returncode, sink.read_text(errors="replace").split("\n")


def record(probe: Path, seed: str, count: str) -> list[str]:
    """Every line of the corpus: the header, then one line per call, in order."""
    lines: list[str] = []
    start = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(MAX_RESTARTS):
            returncode, chunk = _run_from(probe, seed, count, start, Path(tmp) / "chunk")
            tail = chunk.pop()  # "" after a final newline; the cut-short line after a crash
            lines.extend(chunk)
            if returncode == 0 and not tail:
                return lines
            if tail:
                lines.append(tail + f',"crash":"{_status(returncode)}"}}')
            elif returncode != STICKY:
                raise RecordError(
                    f"probe stopped ({_status(returncode)}) between calls after line {len(lines)}"
                )
            last = json.loads(lines[-1])
            if "i" not in last:
                raise RecordError(f"probe stopped ({_status(returncode)}) before its first call")
            start = int(last["i"]) + 1
            print(
                f"record: call {last['i']} ended the run ({_status(returncode)}); restarting at {start}",
                file=sys.stderr,
            )
    raise RecordError(f"more than {MAX_RESTARTS} restarts; last at call {start}")


def check_complete(lines: list[str]) -> dict[str, object]:
    """The header, after checking that calls 0..n-1 are all there, once each, in order."""
    header = json.loads(lines[0]).get("header")
    if not isinstance(header, dict):
        raise RecordError("the first line is not the probe's header")
    expected = int(header["edges"]) + int(header["generated"])
    numbers = [json.loads(line)["i"] for line in lines[1:]]
    if numbers != list(range(expected)):
        raise RecordError(f"calls are not 0..{expected - 1} in order: got {len(numbers)} lines")
    return header


def build(nvcc: str, out: Path) -> None:
    proc = subprocess.run(
        [nvcc, *PROBE_FLAGS, "-o", str(out), str(PROBE_SOURCE)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RecordError(f"building the probe failed:\n{proc.stdout}{proc.stderr}")


def write_corpus(lines: list[str], out: Path) -> None:
    """Gzip'd, byte-for-byte reproducible (no timestamp), replaced atomically."""
    tmp = out.with_name(out.name + ".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode())
    os.replace(tmp, out)


def summary(lines: list[str]) -> str:
    """How many calls of each kind ended how."""
    results = Counter(
        (row["call"], str(row.get("result")), "crash" in row) for row in map(json.loads, lines[1:])
    )
    return "\n".join(
        f"{n:7d}  {call:48s} {result}{'  CRASHED' if crashed else ''}"
        for (call, result, crashed), n in sorted(results.items())
    )


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    nvcc = argv[2] if len(argv) == 3 else "nvcc"
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe"
        build(nvcc, probe)
        lines = record(probe, SEED, COUNT)
    header = check_complete(lines)
    write_corpus(lines, out)
    print(json.dumps(header))
    print(summary(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
