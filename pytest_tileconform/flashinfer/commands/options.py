"""The FlashInfer backend's options, declared once (:class:`...core.runoptions.Option`): the
pytest plugin registers them as ``--tile-<name>`` with their ini keys, the commands that take
them as ``--<name>``; and the options more than one FlashInfer command takes, so they read the
same. Nothing here imports pytest."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...core.runoptions import Option, add_command_option, not_empty

SOURCES = Option(
    "flashinfer-sources",
    str,
    None,
    "FlashInfer kernel sources laid out like flashinfer/data "
    "(default: the installed flashinfer-python; env TILECONFORM_FLASHINFER_SOURCES)",
    "DIR",
    not_empty,
    path=True,
)
RELEASE = Option(
    "flashinfer",
    str,
    None,
    "judge against this FlashInfer release instead of the installed one: a version "
    "(fetched once with pip download, sources only, into the cache), a local wheel or an "
    "unpacked folder",
    "VERSION|PATH",
    not_empty,
)
#: every option of the FlashInfer plugin
PLUGIN_OPTIONS = (SOURCES, RELEASE)


def add_flashinfer_sources(parser: argparse.ArgumentParser) -> None:
    add_command_option(
        parser, SOURCES, "FlashInfer's data directory (default: the installed flashinfer-python)"
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
