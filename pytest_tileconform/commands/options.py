"""Options more than one ``tileconform`` command takes, declared once so they read the same."""

from __future__ import annotations

import argparse
from pathlib import Path

#: The architectures the tactics probe answers for (``flashinfer.tactics.PROBE_SMS``).
TACTICS_ARCHS = "sm90, sm100, sm120 or sm121"


def add_arch(parser: argparse.ArgumentParser, choices: str = TACTICS_ARCHS) -> None:
    parser.add_argument("--arch", required=True, help=choices)


def add_results(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--results",
        action="append",
        type=Path,
        default=[],
        required=required,
        metavar="FILE",
        help="--tile-report file with observed verdicts (repeatable)",
    )


def add_output(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "-o", "--output", type=Path, default=None, metavar="FILE", help=f"write {what} here (default: stdout)"
    )


def add_flashinfer_sources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--flashinfer-sources",
        type=Path,
        default=None,
        metavar="DIR",
        help="FlashInfer's data directory (default: the installed flashinfer-python)",
    )


def add_tactics(parser: argparse.ArgumentParser) -> None:
    """Where FlashInfer's tactics come from: a saved probe output, or the probe (built once)."""
    parser.add_argument(
        "--tactics",
        type=Path,
        default=None,
        metavar="JSONL",
        help="replay a saved tactics probe output instead of running the probe",
    )
    parser.add_argument(
        "--save-tactics", type=Path, default=None, metavar="JSONL", help="save the tactics probe output here"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="build cache for the probe (default: $TILECONFORM_CACHE_DIR or ~/.cache/pytest-tileconform)",
    )
    add_flashinfer_sources(parser)
