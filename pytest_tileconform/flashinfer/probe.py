"""Whether the tool can build a family of cases against a FlashInfer release, known before any
case of it is compiled: a tool failure is never a kernel verdict.

Two checks, both about the tool's own code, never about a kernel:

1. :func:`.features.missing_piece`: a piece the configuration needs that the release's sources
   lack (read from its files; nothing compiled).
2. ``nvcc -cuda`` of :func:`.codegen.probe_unit` (both front ends, and ptxas for the harness's
   own few kernels): the harness instantiated for the case and the generated declarations, with
   the launcher named but not instantiated, so no MoE kernel is compiled and any error is the
   tool's (or the release's headers', with this toolkit). The families of one arch and launcher
   are probed in one unit (one pass over the headers); only when that fails is each probed
   alone, to say which.

Answers are cached in ``CACHE/probes/<key>.json``, keyed by the probe unit's text (which holds
the harness's fingerprint and the release's features), the build command and the build salt
(nvcc, the release's version and sources): each release is probed once per family.

Probes count against ``--tile-build-limit`` as compiles do (a probe is a compile's front end): a
probe runs at most until the build's deadline and none starts after it; a probe cut short gives
no answer (nothing cached), and the build, whose deadline has passed too, compiles nothing.

The probe runs nvcc's whole front end, not only cudafe++ (the host side's): the device side is
parsed again by cicc with ``__CUDA_ARCH__`` defined, and CUTLASS and TensorRT-LLM declare
differently under it, so a host-only probe would pass units whose device pass fails.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..compile.failure import HOST_CAUSES, classify, first_error_line
from ..files import write_atomic
from .buildscript import front_end_command
from .codegen import probe_unit
from .configs import KernelConfig
from .features import ReleaseFeatures, family, missing_piece
from .nvcc_flags import nvcc_command
from .sources import FlashInferSources

PROBES_DIR = "probes"
PROBE_SCHEMA = "tileconform.flashinfer.probe/1"
#: A probe's front end takes 10-40 s of one core; past this something is wrong with the host.
PROBE_TIMEOUT_S = 900.0

#: ``front_end(config, src, out)``: the command that runs the host front end of ``src``
FrontEnd = Callable[[KernelConfig, Path, Path], list[str]]


def front_end(sources: FlashInferSources, cuda_home: Path) -> FrontEnd:
    """The probe's compile: the unit's own nvcc flags (:func:`.nvcc_flags.nvcc_command`), host
    front end only (:func:`.buildscript.front_end_command`)."""

    def command(config: KernelConfig, src: Path, out: Path) -> list[str]:
        return front_end_command(nvcc_command(config, sources, src, out, cuda_home), src, out)

    return command


@dataclass(frozen=True)
class Unbuildable:
    """Why the tool cannot build a family against the release: ``piece`` names what is missing
    (a file and a declaration) or nvcc's first error in the probe."""

    family: str
    piece: str

    def reason(self, release: str) -> str:
        return f"the tool cannot build {self.family} against FlashInfer {release}: {self.piece}"


class ReleaseProbe:
    """The probes of one release's sources (one per family, cached on disk)."""

    def __init__(
        self,
        cache_dir: Path,
        features: ReleaseFeatures,
        salt: str,
        front_end: FrontEnd,
        key_command: Callable[[KernelConfig], str],
    ) -> None:
        """``key_command(config)`` is the build command of ``config``'s arch as the cache keys it
        (install roots as placeholders); ``front_end`` runs a probe."""
        self.dir = cache_dir / PROBES_DIR
        self.features = features
        self.salt = salt
        self.front_end = front_end
        self.key_command = key_command
        self.known: dict[str, Unbuildable | None] = {}
        #: the build's deadline (a time of :data:`clock`): no probe runs past it
        self.deadline: float | None = None
        self.clock: Callable[[], float] = time.monotonic

    def limitations(
        self, configs: Sequence[KernelConfig], jobs: int, deadline: float | None = None
    ) -> dict[KernelConfig, Unbuildable]:
        """The configurations among ``configs`` whose family the tool cannot build, each with
        why (:meth:`probe` first, ``jobs`` front ends at a time, none past ``deadline``)."""
        self.deadline = deadline
        self.probe(configs, jobs)
        found = {config: self.known[family(config)] for config in configs}
        return {config: why for config, why in found.items() if why is not None}

    def limitation(self, config: KernelConfig) -> Unbuildable | None:
        """Why ``config``'s family cannot be built (probing it if not yet known), or None."""
        self.probe([config], jobs=1)
        return self.known[family(config)]

    def probe(self, configs: Sequence[KernelConfig], jobs: int) -> None:
        """Probe the families of ``configs`` not known yet, ``jobs`` front ends at a time."""
        first: dict[str, KernelConfig] = {}
        for config in configs:
            name = family(config)
            if name in self.known or name in first:
                continue
            if (piece := missing_piece(self.features, config)) is not None:
                self.known[name] = Unbuildable(name, piece)
            else:
                first[name] = config
        groups: dict[tuple[int, bool], list[KernelConfig]] = {}
        for config in first.values():
            groups.setdefault((config.arch, config.mixed), []).append(config)
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            together = dict(zip(groups, pool.map(self._front_end, groups.values()), strict=True))
            alone = [c for key, group in groups.items() if together[key] and len(group) > 1 for c in group]
            for config, error in zip(alone, pool.map(lambda c: self._front_end([c]), alone), strict=True):
                self.known[family(config)] = Unbuildable(family(config), error) if error else None
        for key, group in groups.items():
            if len(group) == 1 and (error := together[key]):
                self.known[family(group[0])] = Unbuildable(family(group[0]), error)
            elif not together[key]:
                self.known.update({family(c): None for c in group})

    def _front_end(self, configs: list[KernelConfig]) -> str | None:
        """nvcc's first error in the probe of ``configs`` (one arch and launcher), "" if it
        builds, None if the probe gave no answer (killed or past its time: the host's doing,
        which the compile meets and reports as such); from the cache when probed before."""
        source = probe_unit(configs, self.features)
        digest = hashlib.sha256(
            "\0".join([PROBE_SCHEMA, self.salt, self.key_command(configs[0]), source]).encode()
        ).hexdigest()
        entry = self.dir / f"{digest}.json"
        try:
            cached = json.loads(entry.read_text())
            if cached.get("schema") == PROBE_SCHEMA and isinstance(cached.get("first_error"), str):
                return str(cached["first_error"])
        except (OSError, ValueError):
            pass
        timeout = PROBE_TIMEOUT_S
        if self.deadline is not None:  # --tile-build-limit: the probe is part of the build's time
            timeout = min(timeout, self.deadline - self.clock())
            if timeout <= 0:
                return None
        self.dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.dir, prefix=".probe-") as tmp:
            src = Path(tmp) / "probe.cu"
            src.write_text(source)
            try:
                run = subprocess.run(
                    self.front_end(configs[0], src, Path(tmp) / "probe.ii"),
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return None
            if run.returncode < 0:  # killed (out of memory): asked again next time
                return None
            output = run.stderr + run.stdout
            if run.returncode != 0 and classify(output, Path(tmp), []).cause in HOST_CAUSES:
                return None  # out of memory or disk space, a tool missing: the host's, asked again
        error = "" if run.returncode == 0 else first_error_line(output)
        families = [family(c) for c in configs]
        write_atomic(entry, json.dumps({"schema": PROBE_SCHEMA, "first_error": error, "families": families}))
        return error
