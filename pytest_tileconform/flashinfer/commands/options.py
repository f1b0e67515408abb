"""Options more than one FlashInfer command takes, declared once so they read the same."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...core.runoptions import add_command_option


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
        help="replay a saved tactics probe output instead of running the probe (which needs nvcc "
        "and is compiled on first use: about a minute)",
    )
    parser.add_argument(
        "--save-tactics", type=Path, default=None, metavar="JSONL", help="save the tactics probe output here"
    )
    add_command_option(
        parser,
        "cache-dir",
        "build cache for the probe (default: $TILECONFORM_CACHE_DIR or ~/.cache/pytest-tileconform)",
    )
    add_flashinfer_sources(parser)
