"""Which build cache a run opens: the local one, a remote tier behind it (:mod:`.remote`), and
a Ray farm compiling into that tier (:mod:`.farm`); the one place that knows all three."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .cache import BuildCache, CacheUnusable
from .farm import RayFarm
from .remote import RemoteTier, TieredCache
from .store import RemoteDown, RemoteStore


def open_cache(
    root: Path,
    progress: Callable[[str], None],
    remote: str | None,
    build_on: str | None = None,
    jobs: int | None = None,
) -> BuildCache:
    """The build cache a run uses: the local one, with the ``remote`` tier behind it when a URL
    is given and, with ``build_on`` (``ray://HOST:PORT``), its compiles on that Ray cluster,
    ``jobs`` at a time (None: as many as it runs)."""
    if not remote:
        return BuildCache(root, progress)
    try:
        store = RemoteStore(remote)
    except RemoteDown as exc:
        store = None
        progress(f"remote build cache {remote} is unusable ({exc}): building locally")
    if store is None:
        if build_on:
            raise CacheUnusable(f"the build farm {build_on} delivers through {remote}, which is unusable")
        return BuildCache(root, progress)
    farm = None
    if build_on:
        farm = RayFarm(build_on, jobs)
    return TieredCache(root, progress, tier=RemoteTier(store, progress), farm=farm)
