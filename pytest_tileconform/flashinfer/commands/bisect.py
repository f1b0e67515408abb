"""``tileconform bisect``: which FlashInfer release changed a case's verdict?

Given one or more cases (arch, dtypes, tiles, cluster, fusion, swap_ab: their cartesian product)
and an ordered list of releases, find the releases where the verdict of any of them changes. A
verdict is compared by its *key*: the stage it stopped at, the CUTLASS / CUDA status and the
shared memory the kernel asked for; a release that cannot be judged (its launcher lacks what the
harness needs, it does not compile) has its own key with the reason.

Bisection judges the first and the last release, then halves every interval whose two ends
differ, until each change sits between two neighbouring releases. It assumes what every
bisection assumes: an interval whose ends agree has no change inside (a change that is undone
again within it is not seen). ``--all`` judges every release and prints the whole table.

Judging happens in this process with the FlashInfer backend, on the device pytest's
``--tile-device`` would pick (``auto``, the default: the GPU if it is the case's architecture,
else the virtual device; ``--device virtual`` or ``hardware`` chooses); each release is fetched
and unpacked once into the cache (see :mod:`pytest_tileconform.flashinfer.releases`) and every
build is cached.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from ...commands.options import add_arch
from ...core.runoptions import DeviceChoice, add_command_option, parse_device
from ...dtypes import DTYPES_GRAMMAR
from ...files import write_atomic
from ...verdict import UNRUN, NotJudgeable, Verdict
from ..axes import FUSIONS, MoeCase
from ..problem import DEFAULT_PROBLEM, Problem


def problem_option(problem: Problem) -> str:
    """A problem as ``--problem`` spells it: EXPERTS:ROWS,..:N:K."""
    return f"{len(problem.rows)}:{','.join(map(str, problem.rows))}:{problem.n}:{problem.k}"


#: ``--problem``'s default: the matrix format's default problem.
DEFAULT_PROBLEM_OPTION = problem_option(DEFAULT_PROBLEM)
NOT_JUDGEABLE = "not judgeable"
#: the stages of a case that got through every stage judged (with or without its kernel run)
PASSES = ("pass", UNRUN)


class BisectError(Exception):
    """Bad input or an environment that cannot do the job; the message says what and where."""


@dataclass(frozen=True)
class Outcome:
    """What one release did with one case, reduced to what bisection compares."""

    stage: str  # "pass", UNRUN (a pass whose kernel did not run), a Stage value, or NOT_JUDGEABLE
    status: str = ""
    smem: int | None = None
    limit: int | None = None
    detail: str = ""  # why not judgeable / the compile error / the verdict's detail
    source: str = ""  # who judged it (virtual profile, GPU)
    offered: bool | None = None  # whether FlashInfer's generator emits this configuration
    release: str = ""  # the release judged: version and wheel sha256 (Release.ident)
    #: the last stage a pass was judged through, shown for a GPU's pass so that a table says
    #: whether the graph, repeat and sequence stages ran; not compared between releases
    through: str = ""
    sequence_runs: int = 0  # runs of the sequence stage behind a pass (0: none)

    @property
    def key(self) -> tuple[str, str, int | None]:
        """Compared between releases. A not-judgeable outcome keeps its reason in the key: two
        releases refused for different reasons are not the same verdict."""
        if self.stage == NOT_JUDGEABLE:
            return (self.stage, self.detail, None)
        return (self.stage, self.status, self.smem)

    def cell(self) -> str:
        if self.stage == NOT_JUDGEABLE:
            return "not judgeable"
        text = self.stage if not self.status or self.stage in PASSES else f"{self.stage}: {self.status}"
        if self.stage == "pass" and self.through:
            text += f" through {self.through}"
            if self.sequence_runs:
                text += f" ({self.sequence_runs:,} runs)"
        if self.smem is not None:
            text += f", smem {self.smem:,}"
        if self.offered is False:
            text += " (not shipped)"
        return text


#: Judges every case against one release (a version, a wheel or a folder), in case order.
Judge = Callable[[str, Sequence[MoeCase]], list[Outcome]]


@dataclass
class BisectResult:
    releases: list[str]  # all candidates, in order
    cases: list[MoeCase]
    judged: dict[str, list[Outcome]] = field(default_factory=dict)  # release -> outcomes
    seconds: dict[str, float] = field(default_factory=dict)

    def keys(self, release: str) -> tuple[tuple[str, str, int | None], ...]:
        return tuple(o.key for o in self.judged[release])

    def changes(self) -> list[tuple[str, str]]:
        """Neighbouring releases (both judged) whose verdicts differ."""
        found = []
        for before, after in itertools.pairwise(self.releases):
            if before in self.judged and after in self.judged and self.keys(before) != self.keys(after):
                found.append((before, after))
        return found

    def unresolved(self) -> list[tuple[str, str]]:
        """Judged releases whose verdicts differ with unjudged releases between them (only
        when judging stopped early)."""
        judged = [r for r in self.releases if r in self.judged]
        return [
            (a, b)
            for a, b in itertools.pairwise(judged)
            if self.keys(a) != self.keys(b) and self.releases.index(b) - self.releases.index(a) > 1
        ]


def bisect(
    releases: Sequence[str],
    cases: Sequence[MoeCase],
    judge: Judge,
    everything: bool = False,
    progress: Callable[[str], None] = lambda _m: None,
) -> BisectResult:
    """Judge as few ``releases`` (ordered oldest first) as finding every verdict change needs;
    with ``everything`` judge them all."""
    if not releases:
        raise BisectError("no releases to judge")
    if not cases:
        raise BisectError("no cases to judge")
    result = BisectResult(list(releases), list(cases))

    def judge_at(index: int) -> tuple[tuple[str, str, int | None], ...]:
        release = result.releases[index]
        if release not in result.judged:
            progress(f"judging {len(result.cases)} case(s) against FlashInfer {release}")
            started = time.monotonic()
            outcomes = judge(release, result.cases)
            if len(outcomes) != len(result.cases):
                raise BisectError(
                    f"the judge returned {len(outcomes)} outcomes for {len(result.cases)} cases"
                )
            result.judged[release] = outcomes
            result.seconds[release] = time.monotonic() - started
        return result.keys(release)

    if everything:
        for index in range(len(releases)):
            judge_at(index)
        return result

    def split(lo: int, hi: int) -> None:
        if hi - lo <= 1 or judge_at(lo) == judge_at(hi):
            return
        mid = (lo + hi) // 2
        judge_at(mid)
        split(lo, mid)
        split(mid, hi)

    judge_at(0)
    judge_at(len(releases) - 1)  # also when the two ends are neighbours, which split never judges
    split(0, len(releases) - 1)
    return result


# -- releases ------------------------------------------------------------------------------------


def _version(text: str, where: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise BisectError(f"{where}: {text!r} is not a version") from None


def available_versions(pip: Sequence[str] | None = None) -> list[str]:
    """Every flashinfer-python version the user's pip configuration can see
    (``pip index versions``)."""
    command = [*(pip or [sys.executable, "-m", "pip"]), "index", "versions", "flashinfer-python"]
    proc = subprocess.run(command, capture_output=True, text=True)
    found = re.search(r"^Available versions:\s*(.+)$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or found is None:
        tail = " | ".join([ln for ln in proc.stderr.splitlines() if ln.strip()][-2:])
        raise BisectError(
            f"cannot list flashinfer-python releases with '{' '.join(command)}' ({tail or 'no versions'}); "
            "give --releases or --wheels instead"
        )
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


WHEEL_NAME = re.compile(r"^flashinfer_python-([^-]+)-.*\.whl$")


def wheels_in(folder: Path) -> dict[str, Path]:
    """flashinfer-python wheels in ``folder`` by version (air-gapped runs)."""
    if not folder.is_dir():
        raise BisectError(f"--wheels {folder}: no such folder")
    found = {m.group(1): p for p in sorted(folder.iterdir()) if (m := WHEEL_NAME.match(p.name))}
    if not found:
        raise BisectError(f"--wheels {folder}: no flashinfer_python-*.whl in it")
    return found


def select_releases(
    candidates: Sequence[str], first: str | None, last: str | None, skip_post: bool = False
) -> list[str]:
    """``candidates`` between ``first`` and ``last`` (inclusive), oldest first; pre-releases
    only when an end is one."""
    low = _version(first, "--from") if first else None
    high = _version(last, "--to") if last else None
    if low and high and low > high:
        raise BisectError(f"--from {first} is newer than --to {last}")
    chosen = []
    for text in candidates:
        version = _version(text, "release list")
        if (low and version < low) or (high and version > high):
            continue
        if version.is_prerelease and not any(v and v.is_prerelease for v in (low, high)):
            continue
        if skip_post and version.is_postrelease:
            continue
        chosen.append(text)
    chosen.sort(key=Version)
    if not chosen:
        raise BisectError(f"no release between {first or 'the first'} and {last or 'the newest'}")
    return chosen


# -- cases ---------------------------------------------------------------------------------------

SHAPE = re.compile(r"^\d+x\d+x\d+$")


def _problem(text: str) -> dict[str, Any]:
    """``EXPERTS:ROWS,ROWS,..:N:K`` -> a matrix problem entry."""
    parts = text.split(":")
    if len(parts) != 4:
        raise BisectError(
            f"--problem {text!r}: expected EXPERTS:ROWS[,ROWS...]:N:K, e.g. {DEFAULT_PROBLEM_OPTION}"
        )
    try:
        experts, n, k = int(parts[0]), int(parts[2]), int(parts[3])
        rows = [int(r) for r in parts[1].split(",")]
    except ValueError:
        raise BisectError(f"--problem {text!r}: expected integers, e.g. {DEFAULT_PROBLEM_OPTION}") from None
    return {"experts": experts, "rows": rows if len(rows) > 1 else rows[0], "n": n, "k": k}


def build_cases(args: argparse.Namespace) -> list[MoeCase]:
    """The cases of the command line, validated as a matrix file would be."""
    from ...matrix.load import MatrixInvalid, load_matrix
    from .. import NAME
    from ..axes import KINDS, moe_cases

    for option, values in (("--tile", args.tile), ("--cluster", args.cluster)):
        for value in values:
            if not SHAPE.match(value):
                raise BisectError(f"{option} {value!r}: expected MxNxK, e.g. 128x256x128")
    act, weight, out = _dtypes(args.dtype)
    suite = {
        "name": "bisect",
        "arch": args.arch,
        "dtype": {"act": act, "weight": weight, "out": out},
        "tile": list(args.tile),
        "cluster": list(args.cluster),
        "fusion": list(args.fusion),
        "swap_ab": [_bool(v) for v in args.swap_ab],
        **({"pdl": [_bool(v, "--pdl") for v in args.pdl]} if args.pdl else {}),
        "problems": [_problem(args.problem)],
    }
    text = json.dumps({"version": 1, "backend": NAME, "suites": [suite]}, indent=1)
    path = Path("<bisect arguments>")
    try:
        loaded = load_matrix(path, KINDS, [NAME], text=text)
    except MatrixInvalid as exc:
        # positions in the generated matrix mean nothing to the user; the messages name the axis
        raise BisectError("invalid case: " + "; ".join(e.message for e in exc.errors)) from None
    return moe_cases(loaded.cases)


def _dtypes(text: str) -> tuple[str, str, str]:
    from ...dtypes import parse_dtypes

    try:
        return parse_dtypes(text)
    except ValueError as exc:
        raise BisectError(f"--dtype {exc}") from None


def _bool(text: str, option: str = "--swap-ab") -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise BisectError(f"{option} {text!r}: expected true or false")


# -- the real judge ------------------------------------------------------------------------------


def flashinfer_judge(
    cache_dir: Path,
    device: DeviceChoice,
    jobs: int | None,
    group: int | None,
    timeout: float,
    wheels: dict[str, Path] | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    stages: HardwareStages | None = None,
) -> Judge:
    """Judges with the FlashInfer backend, each release's sources unpacked into ``cache_dir``;
    on the GPU through the hardware ``stages`` (pytest's defaults unless given)."""
    hardware = stages or HardwareStages()
    from ..backend import FlashInferBackend, Settings, kernel_config
    from ..compat import generator_offers, incompatibility
    from ..configs import UnsupportedConfig
    from ..releases import ReleaseError, resolve_release

    def judge(release_spec: str, cases: Sequence[MoeCase]) -> list[Outcome]:
        spec = str(wheels[release_spec]) if wheels and release_spec in wheels else release_spec
        try:
            release = resolve_release(spec, cache_dir)
        except ReleaseError as exc:
            return [Outcome(NOT_JUDGEABLE, detail=str(exc)) for _ in cases]
        reason = incompatibility(release.data_dir)
        if reason is not None:
            return [Outcome(NOT_JUDGEABLE, detail=reason, release=release.ident) for _ in cases]
        settings = Settings(
            device=device,
            cache_dir=cache_dir,
            sources=release.data_dir,
            jobs=jobs,
            group=group,
            timeout=timeout,
            timing_iters=0,
            seed=0,
            keep_runs=False,
            worker_count=1,
            worker_index=0,
            graph_replays=hardware.graph_replays,
            repeats=hardware.repeats,
            sequence=hardware.sequence,
        )
        backend = FlashInferBackend(settings, progress)
        backend.prepare(cases)
        outcomes = []
        for case in cases:
            try:
                offered = generator_offers(release.package, kernel_config(case))
            except UnsupportedConfig:
                offered = False
            try:
                verdict = backend.judge(case)
            except NotJudgeable as exc:
                outcomes.append(
                    Outcome(NOT_JUDGEABLE, detail=str(exc), offered=offered, release=release.ident)
                )
                continue
            outcomes.append(outcome_of(verdict, offered, release.ident))
        return outcomes

    return judge


@dataclass(frozen=True)
class HardwareStages:
    """What the GPU runs after the checked run, as pytest's ``--tile-graph-replays``,
    ``--tile-repeats`` and ``--tile-sequence`` (whose defaults these are)."""

    graph_replays: int = 8
    repeats: int = 3
    sequence: int = 0


def outcome_of(verdict: Verdict, offered: bool | None, release: str) -> Outcome:
    """A verdict as bisection compares and shows it: a pass whose kernel did not run (the virtual
    device's) is :data:`~...verdict.UNRUN`, in the table and the JSON alike, never ``pass``."""
    return Outcome(
        verdict.reported,
        "" if verdict.passed else verdict.status,
        verdict.smem_requested,
        verdict.smem_limit,
        verdict.detail[:300],
        verdict.source,
        offered,
        release,
        verdict.judged_through.value if verdict.passed and verdict.reported == "pass" else "",
        int((verdict.extra.get("sequence") or {}).get("runs", 0)) if verdict.passed else 0,
    )


# -- output --------------------------------------------------------------------------------------


def case_label(case: MoeCase) -> str:
    return case.id


def render(result: BisectResult, everything: bool) -> str:
    """A markdown table (releases x cases) and the list of changes."""
    shown = result.releases if everything else [r for r in result.releases if r in result.judged]
    header = ["release", *(case_label(c) for c in result.cases)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for release in shown:
        cells = (
            [o.cell() for o in result.judged[release]]
            if release in result.judged
            else ["(not judged)"] * len(result.cases)
        )
        lines.append("| " + " | ".join([release, *cells]) + " |")
    lines.append("")
    skipped = len(result.releases) - len(result.judged)
    lines.append(
        f"{len(result.judged)} of {len(result.releases)} releases judged"
        + (f" ({skipped} skipped: the releases around them agree)" if skipped else "")
    )
    changes = result.changes()
    if not changes:
        lines.append("no verdict changes across these releases")
    for before, after in changes:
        lines.append(f"changed between {before} and {after}:")
        for case, old, new in zip(result.cases, result.judged[before], result.judged[after], strict=True):
            if old.key != new.key:
                lines.append(f"  {case_label(case)}: {old.cell()} -> {new.cell()}")
    if any(o.stage == UNRUN for outcomes in result.judged.values() for o in outcomes):
        lines.append(f"{UNRUN}: passed every stage the device judges; the kernel did not run (not a pass)")
    reasons = {o.detail for outcomes in result.judged.values() for o in outcomes if o.stage == NOT_JUDGEABLE}
    for reason in sorted(reasons):
        releases = [
            r for r in shown if r in result.judged and any(o.detail == reason for o in result.judged[r])
        ]
        lines.append(f"not judgeable ({', '.join(releases)}): {reason}")
    return "\n".join(lines)


def to_json(result: BisectResult) -> dict[str, Any]:
    return {
        "schema": "tileconform.bisect/1",
        "releases": result.releases,
        "cases": [c.id for c in result.cases],
        "judged": {r: [asdict(o) for o in outs] for r, outs in result.judged.items()},
        "seconds": result.seconds,
        "changes": result.changes(),
    }


# -- command line --------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bisect",
        help="find the FlashInfer releases where a case's verdict changes",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(
            """\
            example (the SM120 NVFP4 finalize story):
              tileconform bisect --arch sm120 --dtype nvfp4:nvfp4:bf16 \\
                --tile 128x256x128 --tile 256x128x128 --fusion none --fusion finalize \\
                --from 0.5.3 --to 0.7.4
            """
        ),
    )
    configure_parser(parser)
    return parser


def configure_parser(parser: argparse.ArgumentParser) -> None:
    case = parser.add_argument_group("the case(s): the cartesian product of these")
    add_arch(case)
    case.add_argument("--dtype", required=True, help=f"the case's dtypes: {DTYPES_GRAMMAR}")
    case.add_argument("--tile", action="append", required=True, help="CTA MxNxK, K in elements (repeatable)")
    case.add_argument("--cluster", action="append", default=None, help="MxNxK (repeatable; default 1x1x1)")
    case.add_argument(
        "--fusion",
        action="append",
        default=None,
        choices=FUSIONS,
        help="repeatable; default none",
    )
    case.add_argument(
        "--swap-ab", action="append", default=None, help="true/false (repeatable; default false)"
    )
    case.add_argument(
        "--pdl",
        action="append",
        default=None,
        help="true/false (repeatable; default: as the release's FlashInfer decides)",
    )
    case.add_argument(
        "--problem",
        default=DEFAULT_PROBLEM_OPTION,
        help=f"EXPERTS:ROWS,..:N:K (default {DEFAULT_PROBLEM_OPTION})",
    )
    which = parser.add_argument_group("the releases")
    which.add_argument("--from", dest="first", help="oldest release (inclusive)")
    which.add_argument("--to", dest="last", help="newest release (inclusive)")
    which.add_argument(
        "--releases",
        help="comma-separated versions, wheels or folders, oldest first "
        "(instead of listing the package index)",
    )
    which.add_argument(
        "--wheels",
        type=Path,
        help="take releases from the flashinfer_python-*.whl in this "
        "folder instead of the package index (air-gapped)",
    )
    which.add_argument("--skip-post", action="store_true", help="leave out .postN releases")
    run = parser.add_argument_group("judging")
    run.add_argument(
        "--all", dest="everything", action="store_true", help="judge every release, print the full table"
    )
    run.add_argument(
        "--device",
        default=DeviceChoice("auto"),
        type=parse_device,
        help="as pytest's --tile-device: auto (the default: the GPU if it is the case's arch, else "
        "the virtual device), hardware, virtual or virtual:ARCH",
    )
    add_command_option(run, "cache-dir", "default: the plugin's cache")
    add_command_option(run, "build-jobs", "parallel compiles")
    add_command_option(run, "build-group", "most instantiations per translation unit (default 36)")
    add_command_option(run, "timeout", "per-case run limit (s)")
    for name in ("graph-replays", "repeats", "sequence"):
        add_command_option(run, name)
    run.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")


def main(args: argparse.Namespace, judge: Judge | None = None) -> int:
    from ...compile.cache import default_cache_dir

    def progress(message: str) -> None:
        print(f"tileconform bisect: {message}", file=sys.stderr, flush=True)

    args.cluster = args.cluster or ["1x1x1"]
    args.fusion = args.fusion or ["none"]
    args.swap_ab = args.swap_ab or ["false"]
    try:
        if args.json is not None and args.json.is_dir():
            raise BisectError(f"--json {args.json}: is a folder; name a file in it")
        cases = build_cases(args)
        wheels = wheels_in(args.wheels) if args.wheels else None
        if args.releases:
            if args.first or args.last:
                raise BisectError("--releases lists the releases itself; leave out --from/--to")
            releases = [r.strip() for r in args.releases.split(",") if r.strip()]
        else:
            candidates = list(wheels) if wheels is not None else available_versions()
            releases = select_releases(candidates, args.first, args.last, args.skip_post)
        cache_dir = args.cache_dir or default_cache_dir()
        if judge is None:
            stages = HardwareStages(args.graph_replays, args.repeats, args.sequence)
            judge = flashinfer_judge(
                cache_dir,
                args.device,
                args.build_jobs,
                args.build_group,
                args.timeout,
                wheels,
                progress,
                stages,
            )
        started = time.monotonic()
        result = bisect(releases, cases, judge, args.everything, progress)
    except BisectError as exc:
        print(f"tileconform bisect: error: {exc}", file=sys.stderr)
        return 2
    print(render(result, args.everything))
    print(f"wall time {time.monotonic() - started:.0f} s")
    if args.json:
        try:
            write_atomic(args.json, json.dumps(to_json(result), indent=1) + "\n")
        except OSError as exc:
            why = exc.strerror or exc
            print(f"tileconform bisect: error: cannot write {args.json}: {why}", file=sys.stderr)
            return 2
    return 0
