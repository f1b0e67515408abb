"""The benchmark driver: one entry, a routine per question, on any host where the package is
installed (a GPU host for ``--device hardware``; ``--device virtual`` runs anywhere with nvcc).

    python benchmarks/run.py --routine ROUTINE [ROUTINE ...] [--matrix M] [-k EXPR] [--name N]
                             [--device hardware|virtual] [--out DIR] [-- PYTEST_ARGS...]

Routines (several run in the order given, on one build cache, so ``cold warm`` times both):

- ``first-verdict``: time to the first verdict of one case (default: the shipped smoke matrix's
  ``bf16-128x128x64``) from an empty cache, again from the filled one, and once more from a copy
  of it at another path (a cache another machine filled);
- ``cold``: the matrix (or ``-k`` slice) from an empty build cache;
- ``warm``: the same on the cache as it is (after ``cold``: every unit cached);
- ``overhead``: benchmarks/dsv3-prefill.yaml through every hardware stage with timed calls, then
  benchmarks/case_overhead.py (each case's duration minus kernel time);
- ``speedup``: one xdist worker against one per GPU (``-n auto``) on cached builds, verdicts
  compared;
- ``virtual-compare``: the slice on hardware and on the virtual device from the same builds,
  compared case by case (``tileconform report compare``);
- ``record-slice``: the slice judged with ``--tile-update`` in one process, under ``--limit``
  seconds (SIGINT: the session still ends and writes its report and the matrix).

Into ``--out`` (default ``$OUT`` or ``./bench-out``): ``NAME-RUN.json.gz`` (each pytest run's
``--tile-report``), ``NAME-RUN.log``, and ``NAME-summary.json``: per run its command, exit status
and wall seconds, with the machine (GPUs, nvcc, cores). The figures go to BENCHMARKS.md with the
command. How this project's rented host is provisioned first is lab/ (not shipped).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROUTINES = ("first-verdict", "cold", "warm", "overhead", "speedup", "virtual-compare", "record-slice")
DEFAULT_MATRIX = "smoke-sm90"  # a shipped matrix: its name, or a file


class Bench:
    """One driver invocation: where reports go, the cache the routines share, what ran."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out or os.environ.get("OUT") or "bench-out").resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.cache = Path(args.cache_dir or tempfile.mkdtemp(prefix="tc-bench-cache-")).resolve()
        self.runs: list[dict[str, Any]] = []

    @property
    def matrix(self) -> str:
        given: str = self.args.matrix
        return given if given.endswith(".yaml") else str(shipped_matrix(given))

    def pytest(
        self,
        run: str,
        *extra: str,
        device: str | None = None,
        env: dict[str, str] | None = None,
        limit: float | None = None,
        update: bool = False,
    ) -> dict[str, Any]:
        """One pytest process over the matrix; its report gzipped into out/NAME-RUN.json.gz."""
        report = self.out / f"{self.args.name}-{run}.json"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--tile-matrix",
            self.matrix,
            "--tile-device",
            device or self.args.device,
            "--tile-report",
            str(report),
            *extra,
        ]
        if self.args.select:  # @FILE: the expression is the file's text (long lists of case ids)
            select = self.args.select
            command += ["-k", Path(select[1:]).read_text().strip() if select.startswith("@") else select]
        if update:
            command.append("--tile-update")
        command += self.args.pytest_args
        return self.command(run, command, env=env, limit=limit, report=report)

    def command(
        self,
        run: str,
        command: list[str],
        env: dict[str, str] | None = None,
        limit: float | None = None,
        report: Path | None = None,
    ) -> dict[str, Any]:
        environment = {**os.environ, "TILECONFORM_CACHE_DIR": str(self.cache), **(env or {})}
        log = self.out / f"{self.args.name}-{run}.log"
        start = time.monotonic()
        with log.open("w") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=environment)
            try:
                status = process.wait(timeout=limit)
            except subprocess.TimeoutExpired:  # as Ctrl-C: the session ends and writes its report
                process.send_signal(signal.SIGINT)
                status = process.wait()
        seconds = round(time.monotonic() - start, 1)
        entry: dict[str, Any] = {"run": run, "command": command, "exit": status, "seconds": seconds}
        if report is not None and report.exists():
            packed = report.with_name(report.name + ".gz")
            packed.write_bytes(gzip.compress(report.read_bytes(), mtime=0))
            report.unlink()
            entry["report"] = packed.name
        self.runs.append(entry)
        print(f"{self.args.name}-{run}: exit {status} in {seconds} s", flush=True)
        return entry

    def empty_cache(self) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.mkdir(parents=True)

    def summary(self) -> Path:
        path = self.out / f"{self.args.name}-summary.json"
        path.write_text(json.dumps({"machine": machine(), "runs": self.runs}, indent=1) + "\n")
        return path


def shipped_matrix(name: str) -> Path:
    """A matrix shipped with the installed package (a file in it: packages install as files)."""
    from pytest_tileconform.flashinfer.commands.matrices import shipped_folder

    return Path(str(shipped_folder().joinpath(name.removesuffix(".yaml") + ".yaml")))


def machine() -> dict[str, Any]:
    """What ran it: the GPUs (nvidia-smi), nvcc, cores, Python."""

    def output(*command: str) -> str:
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    gpus = output("nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader")
    nvcc = output("nvcc", "--version").splitlines()
    return {
        "gpus": gpus.splitlines(),
        "nvcc": nvcc[-1] if nvcc else "",
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "host": platform.node(),
    }


def first_verdict(bench: Bench) -> None:
    bench.args.select = bench.args.select or "bf16-128x128x64"
    bench.empty_cache()
    bench.pytest("first-cold", "-p", "no:xdist")
    bench.pytest("first-warm", "-p", "no:xdist")
    elsewhere = bench.cache.with_name(bench.cache.name + "-elsewhere")
    shutil.rmtree(elsewhere, ignore_errors=True)
    shutil.copytree(bench.cache, elsewhere, symlinks=True)
    bench.pytest("first-elsewhere", "-p", "no:xdist", env={"TILECONFORM_CACHE_DIR": str(elsewhere)})


def cold(bench: Bench) -> None:
    bench.empty_cache()
    bench.pytest("cold", "-n", bench.args.workers, update=bench.args.update)


def warm(bench: Bench) -> None:
    bench.pytest("warm", "-n", bench.args.workers)


def overhead(bench: Bench) -> None:
    bench.args.matrix = str(HERE / "dsv3-prefill.yaml")
    entry = bench.pytest(
        "overhead", "-p", "no:xdist", "-rA", "--tile-timing-iters", str(bench.args.timing), device="hardware"
    )
    if "report" in entry:
        report = bench.out / entry["report"]
        bench.command(
            "overhead-summary",
            [
                sys.executable,
                str(HERE / "case_overhead.py"),
                str(report),
                "--json",
                str(bench.out / f"{bench.args.name}-overhead-summary.json"),
            ],
        )


def speedup(bench: Bench) -> None:
    one = bench.pytest("speedup-n1", "-n", "1")
    every = bench.pytest("speedup-nauto", "-n", "auto")
    compare(bench, "speedup-compare", one, every)


def virtual_compare(bench: Bench) -> None:
    hardware = bench.pytest("compare-hardware", "-n", bench.args.workers, device="hardware")
    virtual = bench.pytest("compare-virtual", "-n", bench.args.workers, device="virtual")
    compare(bench, "compare", hardware, virtual)


def record_slice(bench: Bench) -> None:
    extra = ["-n", bench.args.workers]
    if bench.args.limit and bench.args.limit > 180:  # stop compiling in time to judge what was built
        extra += ["--tile-build-limit", str(int(bench.args.limit - 90))]
    bench.pytest("record", *extra, limit=bench.args.limit, update=True)
    shutil.copyfile(bench.matrix, bench.out / f"{bench.args.name}-matrix.yaml")


def compare(bench: Bench, run: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    if "report" in first and "report" in second:
        bench.command(
            run,
            [
                sys.executable,
                "-m",
                "pytest_tileconform",
                "report",
                "compare",
                str(bench.out / first["report"]),
                str(bench.out / second["report"]),
            ],
        )


RUN = {
    "first-verdict": first_verdict,
    "cold": cold,
    "warm": warm,
    "overhead": overhead,
    "speedup": speedup,
    "virtual-compare": virtual_compare,
    "record-slice": record_slice,
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--routine", nargs="+", choices=ROUTINES, required=True)
    parser.add_argument("--matrix", default=DEFAULT_MATRIX, help="a shipped matrix's name or a file")
    parser.add_argument(
        "-k", dest="select", default="", help="pytest -k expression (a slice), or @FILE holding one"
    )
    parser.add_argument("--name", default="bench", help="prefix of the files written")
    parser.add_argument("--device", default="hardware", choices=("hardware", "virtual"))
    parser.add_argument(
        "--out", help="folder for reports, logs and the summary (default $OUT or ./bench-out)"
    )
    parser.add_argument("--cache-dir", help="the build cache the routines share (default: a new one)")
    parser.add_argument("--workers", default="1", help="pytest-xdist workers (-n) of cold, warm and compare")
    parser.add_argument("--update", action="store_true", help="cold: record expectations (--tile-update)")
    parser.add_argument("--limit", type=float, help="record-slice: interrupt pytest after this many seconds")
    parser.add_argument("--timing", type=int, default=5, help="overhead: timed calls per case")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to every pytest run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    bench = Bench(args)
    for routine in args.routine:
        RUN[routine](bench)
    print(f"summary: {bench.summary()}")
    return max((run["exit"] for run in bench.runs if run["exit"] not in (0, 1)), default=0)


if __name__ == "__main__":
    sys.exit(main())
