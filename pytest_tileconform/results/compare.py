"""Does the virtual device agree with the hardware? Compare two ``--tile-report`` files.

A virtual device judges through ``launch``; a hardware verdict of ``run`` or ``numerics`` (or
``pass``) means the launch was accepted, so it agrees with a virtual ``pass``. Every other
stage must be the same, and so must the shared memory the kernel asked for.

    python -m pytest_tileconform.fidelity HARDWARE.json VIRTUAL.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BEYOND_LAUNCH = ("pass", "run", "numerics")


@dataclass(frozen=True)
class Disagreement:
    case_id: str
    hardware: str
    virtual: str


def _verdicts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c["verdict"] for c in report["cases"] if c.get("verdict")}


def _key(verdict: dict[str, Any]) -> tuple[str, int | None]:
    outcome = verdict["outcome"]
    return ("launch accepted" if outcome in BEYOND_LAUNCH else outcome, verdict.get("smem_requested"))


def compare(hardware: dict[str, Any], virtual: dict[str, Any]) -> tuple[int, list[Disagreement]]:
    """(cases judged by both, the cases where they disagree)."""
    hw, vr = _verdicts(hardware), _verdicts(virtual)
    common = sorted(hw.keys() & vr.keys())
    disagreements = []
    for case_id in common:
        h, v = _key(hw[case_id]), _key(vr[case_id])
        if h != v:
            disagreements.append(Disagreement(case_id, f"{h[0]} smem={h[1]}", f"{v[0]} smem={v[1]}"))
    return len(common), disagreements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_tileconform.fidelity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("hardware", type=Path)
    parser.add_argument("virtual", type=Path)
    args = parser.parse_args(argv)
    total, disagreements = compare(
        json.loads(args.hardware.read_text()), json.loads(args.virtual.read_text())
    )
    for d in disagreements:
        print(f"DISAGREE {d.case_id}: hardware {d.hardware} | virtual {d.virtual}")
    print(f"{total - len(disagreements)}/{total} cases agree (stage and shared memory requested)")
    if total == 0:
        print("no case was judged by both", file=sys.stderr)
        return 2
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
