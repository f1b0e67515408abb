"""``tileconform cache push URL``: a local build cache's entries into a team's remote tier.

A run uploads what it builds; a cache filled before the team had a remote (or on a host that
had none) is published with this, each entry checked as a run's lookup checks it first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .output import EXIT_ENVIRONMENT, EXIT_OK, CommandError, emit, message


def _push(args: argparse.Namespace) -> int:
    from ..compile.cache import default_cache_dir
    from ..compile.caches import open_cache
    from ..compile.remote import TieredCache

    root: Path = args.cache_dir or default_cache_dir()
    if not root.is_dir():
        raise CommandError(f"no build cache at {root}")
    cache = open_cache(root, message, args.url)
    if not isinstance(cache, TieredCache):
        raise CommandError(f"the remote build cache {args.url} is unusable", EXIT_ENVIRONMENT)
    offered, refused = cache.push()  # CacheUnusable: the command line's exit 3, its one line
    emit(f"{offered} entries of {root} in {args.url} ({refused} refused here, not pushed)", None)
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = subparsers.add_parser(
        "cache",
        help="work with the build cache",
        description="Work with the build cache (--tile-cache-dir) and a team's remote tier.",
    )
    actions = cache.add_subparsers(dest="action", metavar="ACTION", required=True)
    push = actions.add_parser(
        "push",
        help="upload a local build cache's entries into a remote tier",
        description="Upload every entry of the local build cache that the remote tier at URL lacks "
        "(as --tile-cache-remote takes it: s3://, file://, any fsspec protocol; https:// is read "
        "only), each checked first as a run checks it (the trust settings and keys of the "
        "environment apply: with a verify key, only a signing key may push). Entries the remote "
        "has are left as they are.",
        epilog="Exit status: 0 pushed (the line says how many, and how many were refused here), "
        "2 no cache there, 3 the remote cannot take them.",
    )
    push.add_argument("url", metavar="URL", help="the remote tier")
    push.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="the local build cache (default: $TILECONFORM_CACHE_DIR or ~/.cache/pytest-tileconform)",
    )
    push.set_defaults(handler=_push)
