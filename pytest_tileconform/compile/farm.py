"""Compiling units on a Ray cluster (``--tile-build-on ray://HOST:PORT``, the ``ray`` extra): a
team's build farm, through an engine it already runs. No scheduler or RPC of our own: each unit
the backend's planner chose is one Ray task, asking for the cores and
memory the cost model gives it, longest first, and Ray places, retries (a worker that dies
mid-compile: the task runs again elsewhere) and cancels them.

A task compiles its unit with the same :class:`.cache.BuildCache` code as a local build, into
the worker's own local cache (``TILECONFORM_CACHE_DIR`` on the node, else its default), with
the remote tier behind it (:mod:`.remote`), and returns only once the unit is in the remote
tier; the driver then fetches and checks it like any remote entry. So results travel only
through the remote tier, and whoever signs is the farm: its nodes hold the signing key
(``TILECONFORM_CACHE_SIGNING_KEY`` in their environment), the driver only the verify key.

The nodes need this package, the sources the backend builds from and the CUDA toolkit at the
paths the driver names (one image for the driver and the farm; the unit's command says where they are).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..verdict import UnusableEnvironment
from .cache import BuildSpec, default_cache_dir
from .remote import Outcome, RemoteTier, TieredCache
from .store import RemoteStore

#: How often a unit's task is run again after the worker running it died (a node lost, a
#: process killed); a compile error is a result, never retried.
RETRIES = 2


class FarmError(UnusableEnvironment):
    """The farm cannot be reached, or failed a unit for its own reasons: one line, the session
    stops (a GPU job that meant to judge with no compile should not quietly compile)."""


def check_address(address: str) -> str:
    """``ray://HOST:PORT`` once ``ray`` is importable; ValueError says why not."""
    parts = urlsplit(address)
    if parts.scheme != "ray" or not parts.hostname or parts.port is None or parts.path not in ("", "/"):
        raise ValueError(f"{address!r}: give the cluster's Ray Client address, ray://HOST:PORT")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError(
            f"{address}: building on Ray needs ray: pip install 'pytest-tileconform[ray]'"
        ) from None
    return address


def compile_unit(spec: BuildSpec, remote: str) -> Outcome:
    """A task: ``spec`` compiled into this node's cache and uploaded to ``remote`` (found there
    or here already: nothing compiled). Raises when the unit could not be put there."""
    lines: list[str] = []
    tier = RemoteTier(RemoteStore(remote), lines.append)
    cache = TieredCache(default_cache_dir(), lines.append, tier=tier)
    result = cache.build([spec], jobs=1)[spec.key]
    if result.environment is not None:
        return Outcome(spec.key, result.seconds, result.environment)
    tier.upload(cache.entry(spec), spec.key)
    if not tier.has(spec.key):
        why = "; ".join(lines[-2:]) or "the upload did not happen"
        raise RuntimeError(f"{spec.label} was compiled but is not in {remote}: {why}")
    return Outcome(spec.key, result.seconds)


class RayFarm:
    """A Ray cluster compiles units; this process connects to it at its first build."""

    def __init__(self, address: str, most_at_once: int | None = None) -> None:
        """``most_at_once``: tasks in flight at a time (``--tile-build-jobs``; None: as many as
        the cluster runs)."""
        self.address = check_address(address)
        self.most_at_once = most_at_once
        self._ray: Any = None

    def _connect(self) -> Any:
        if self._ray is None:
            import ray

            try:
                if not ray.is_initialized():  # one connection a process: Ray Client's own rule
                    self._init(ray)
            except Exception as exc:
                raise FarmError(f"the build farm {self.address} cannot be reached: {_line(exc)}") from None
            self._ray = ray
        return self._ray

    def _init(self, ray: Any) -> None:
        """Connect, trying again twice when the cluster's Ray Client proxy failed to start this
        client's server (it forks one per client, which can die on a loaded head node); an
        unreachable cluster is not tried again (its timeout is Ray Client's own, about 30 s)."""
        for attempt in range(3):
            try:
                with warnings.catch_warnings():  # its timeout is said in our one line
                    warnings.simplefilter("ignore")
                    ray.init(address=self.address, logging_level=logging.ERROR, log_to_driver=False)
                return
            except ConnectionAbortedError:
                if attempt == 2:
                    raise
                ray.shutdown()

    def _nodes(self) -> list[dict[str, float]]:
        return [n["Resources"] for n in self._connect().nodes() if n.get("Alive")]

    def capacity(self) -> tuple[int, int]:
        """The farm's cores and memory, all nodes together (what units are planned for)."""
        nodes = self._nodes()
        cores = int(sum(n.get("CPU", 0) for n in nodes))
        return max(1, cores), int(sum(n.get("memory", 0) for n in nodes)) or 1 << 30

    def build(
        self,
        specs: Sequence[BuildSpec],
        remote: str,
        deadline: float | None,
        clock: Callable[[], float],
        progress: Callable[[str], None],
    ) -> Iterator[tuple[BuildSpec, Outcome]]:
        """Compile ``specs`` as tasks (longest first, each asking the cores and memory the cost
        model gives it, capped at the largest node's), yielding each as it ends. Past
        ``deadline`` (a time of ``clock``) the tasks still running are cancelled."""
        ray = self._connect()
        nodes = self._nodes()
        most_cpu = max((n.get("CPU", 1) for n in nodes), default=1)
        most_memory = max((n.get("memory", 0) for n in nodes), default=0)
        task = ray.remote(max_retries=RETRIES)(compile_unit)
        waiting = sorted(specs, key=lambda s: -s.path_s)
        pending: dict[Any, BuildSpec] = {}

        def submit() -> None:
            while waiting and (self.most_at_once is None or len(pending) < self.most_at_once):
                spec = waiting.pop(0)
                cpus = min(most_cpu, max(1, math.ceil(spec.cpu_s / spec.path_s))) if spec.path_s else 1
                options: dict[str, Any] = {"num_cpus": cpus, "name": f"tileconform {spec.label}"[:200]}
                if most_memory:
                    options["memory"] = min(int(most_memory), spec.ram_bytes)
                pending[task.options(**options).remote(spec, remote)] = spec

        at_once = "" if self.most_at_once is None else f", {self.most_at_once} at a time"
        progress(f"compiling {len(waiting)} translation unit(s) on the build farm {self.address}{at_once}")
        done = 0
        try:
            submit()
            while pending:
                left = None if deadline is None else max(0.0, deadline - clock())
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
                if not ready:
                    left_out = len(pending) + len(waiting)
                    progress(f"the build's time limit passed: {left_out} unit(s) for the farm cancelled")
                    return
                spec = pending.pop(ready[0])
                try:
                    outcome: Outcome = ray.get(ready[0])
                except Exception as exc:
                    raise FarmError(
                        f"the build farm {self.address} failed {spec.label} ({RETRIES} retries when its "
                        f"worker is lost): {_line(exc)}"
                    ) from None
                done += 1
                total = done + len(pending) + len(waiting)
                progress(f"{spec.label}: compiled on the farm in {outcome.seconds:.0f} s ({done}/{total})")
                yield spec, outcome
                submit()
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)


def _line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else type(exc).__name__
    return text.strip()[:300]
