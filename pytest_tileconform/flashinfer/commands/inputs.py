"""What the FlashInfer commands read: FlashInfer's sources and the tactics probe's output (live
from FlashInfer's host code, or a saved one replayed). Each problem with them is a
:class:`...commands.output.CommandError` with the exit status the commands document."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ...archs import arch_name
from ...commands.output import EXIT_ENVIRONMENT, CommandError, emit, message

if TYPE_CHECKING:
    from ..sources import FlashInferSources
    from ..tactics.offered import Tactic


def installed_sources(override: Path | None) -> FlashInferSources:
    from ..sources import FlashInferSourcesError, find_sources

    try:
        return find_sources(override)
    except FlashInferSourcesError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None


def chosen_sources(release: str | None, folder: Path | None, cache_dir: Path | None) -> FlashInferSources:
    """FlashInfer's sources a command is given: a release (``--flashinfer``, unpacked into the
    build cache as ``--tile-flashinfer`` unpacks it), a folder (``--flashinfer-sources``) or the
    installed package."""
    if release is None:
        return installed_sources(folder)
    if folder is not None:
        raise CommandError("--flashinfer and --flashinfer-sources both name FlashInfer's sources: give one")
    from ...compile.cache import default_cache_dir
    from ..releases import ReleaseError, resolve_release

    try:
        return resolve_release(release, cache_dir or default_cache_dir()).sources()
    except ReleaseError as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None


def probe_built(sources: FlashInferSources, cache: Path) -> bool:
    """Whether the tactics probe for ``sources`` is in the build cache already."""
    from ...compile.cache import BuildCache
    from ..sources import FlashInferSourcesError, find_cuda_home
    from ..tactics.offered import probe_spec

    try:
        home = find_cuda_home()
        spec = probe_spec(sources, home, cache)
    except (FlashInferSourcesError, OSError):
        return False  # the build says what is missing
    return BuildCache(cache).lookup(spec) is not None


def tactic_lines(args: argparse.Namespace, arch: str, sources: FlashInferSources | None) -> list[str]:
    """The tactics probe's output: replayed from --tactics, or from FlashInfer's own host code."""
    from ...compile.cache import default_cache_dir
    from ..sources import FlashInferSourcesError
    from ..tactics.offered import PROBE_SMS, ProbeError, offered_tactics

    if args.tactics is not None:
        return replayed_lines(args.tactics)
    if arch not in PROBE_SMS:
        raise CommandError(f"--arch {arch}: the tactics probe answers for {', '.join(PROBE_SMS)}")
    if sources is None:
        sources = installed_sources(args.flashinfer_sources)
    cache = args.cache_dir or default_cache_dir()
    if not probe_built(sources, cache):
        message(
            f"building the tactics probe from FlashInfer {sources.version}'s sources with nvcc: once "
            f"per FlashInfer and nvcc, about a minute on one core and 2 GB, cached in {cache} "
            "(--tactics JSONL replays a probe output saved with --save-tactics instead)"
        )
    message(f"asking FlashInfer {sources.version}'s heuristic and dispatch (tactics probe)")
    try:
        lines = offered_tactics(sources, [arch], cache, message)
    except (ProbeError, FlashInferSourcesError) as exc:
        raise CommandError(str(exc), EXIT_ENVIRONMENT) from None
    if args.save_tactics is not None:
        emit("\n".join(lines), args.save_tactics)
    return lines


#: The largest --tactics file read: the probe's output for one architecture is about 100 kB.
MAX_TACTICS_BYTES = 64 * 1024 * 1024


def replayed_lines(path: Path) -> list[str]:
    """The lines of a saved probe output: a regular UTF-8 file of bounded size, else exit 2."""
    from ...files import read_regular

    try:
        raw = read_regular(path, MAX_TACTICS_BYTES, "tactics file")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text (a --save-tactics file is): {exc}") from None


def offered(args: argparse.Namespace, arch: str, sources: FlashInferSources | None) -> list[Tactic]:
    """FlashInfer's tactics for ``arch`` (see :func:`tactic_lines`). A file that cannot be read
    is bad input (exit 2); lines that are not the probe's output, saved or live, are the probe's
    failure (exit 3), as a tool that answered wrongly."""
    from ..tactics.offered import ProbeError, parse

    try:
        return [t for t in parse(tactic_lines(args, arch, sources)) if arch_name(t.sm) == arch]
    except ProbeError as exc:
        raise CommandError(f"{args.tactics or 'tactics probe'}: {exc}", EXIT_ENVIRONMENT) from None
