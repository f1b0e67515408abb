"""A remote tier behind the local build cache (``--tile-cache-remote URL``): read-through and
write-back, so a team (CI's CPU jobs, a Ray build farm, each developer) compiles a unit once.

The remote holds two kinds of objects (:mod:`.store`):

* ``blobs/XX/<sha256>``: each file of an entry, named by its SHA-256, so writers of one unit
  write identical objects and a blob is never replaced by different bytes;
* ``entries/XX/<key>.json``: an entry's manifest, its ``build.json`` as written locally (key,
  files' sums, inputs) and that file's Ed25519 signature when the writer signs. It is published
  last, after every blob it names: a reader sees a whole entry or none, and a writer killed
  mid-upload leaves only objects no manifest names. Two writers of one key each publish a
  whole manifest naming blobs that are there; the last one stays.

A unit missing locally is looked up there once per session. What is found is fetched into a
private folder of the local cache and checked exactly as a local entry is (:mod:`.trust`: the
signature when a key is configured, the key it is filed under, the inputs it was built from,
every file's sum) before it is moved into place with one rename; nothing fetched is run
unchecked, and an entry that fails is reported, built here and (when the user may write)
uploaded over the bad one. A unit built here is uploaded after it is published locally. A
remote that is slow or down is one line, after which the session builds locally and asks it
nothing more.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .cache import BuildCache, BuildResult, BuildSpec, CacheUnusable, _clear
from .failure import Failure
from .inputs import BuildInput
from .store import RemoteDown, RemoteForbidden, RemoteStore
from .trust import (
    ENTRY_FILE,
    FILE_NAME,
    KEY_NAME,
    MAX_FILE_BYTES,
    MAX_META_BYTES,
    SIGNATURE_FILE,
    TrustPolicy,
    Untrusted,
    check_files,
    check_inputs,
    read_meta,
    umask,
)

MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class Outcome:
    """A unit compiled by a task: how long it took, and the failure of the farm's host that
    kept it from a result (None: it is in the remote tier, built or a compile error)."""

    key: str
    seconds: float
    failure: Failure | None = None


class Farm(Protocol):
    """What the tier asks of a build farm (:class:`.farm.RayFarm`): where it is, how large,
    and each unit compiled into the remote tier at ``remote``, yielded as it ends."""

    address: str

    def capacity(self) -> tuple[int, int]: ...

    def build(
        self,
        specs: Sequence[BuildSpec],
        remote: str,
        deadline: float | None,
        clock: Callable[[], float],
        progress: Callable[[str], None],
    ) -> Iterator[tuple[BuildSpec, Outcome]]: ...


SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: A manifest is a ``build.json`` and its signature, with room for JSON's escapes.
MAX_MANIFEST_BYTES = 2 * MAX_META_BYTES


def manifest_name(key: str) -> str:
    return f"entries/{key[:2]}/{key}.json"


def blob_name(digest: str) -> str:
    return f"blobs/{digest[:2]}/{digest}"


class RemoteTier:
    """The remote's entries: fetched and checked into a staging folder, or uploaded from a
    published local entry. ``say`` is told, in one line each, that the remote is unusable (once)
    or read only (once), and why an entry of it was refused."""

    def __init__(self, store: RemoteStore, say: Callable[[str], None]) -> None:
        self.store = store
        self.say = say
        self.down: str | None = None
        self.read_only = not store.writable
        #: keys and blobs whose remote copy failed its checks: an upload replaces them
        self._refused: set[str] = set()

    @property
    def url(self) -> str:
        return self.store.url

    def _unusable(self, exc: Exception) -> None:
        if self.down is None:
            self.down = str(exc)
            self.say(
                f"remote build cache {self.url} is unusable ({exc}): building locally, and asking "
                "it nothing more this session"
            )

    def has(self, key: str) -> bool:
        if self.down is not None:
            return False
        try:
            return self.store.exists(manifest_name(key))
        except (RemoteDown, RemoteForbidden) as exc:
            self._unusable(exc)
            return False

    # -- reading -------------------------------------------------------------------------
    def fetch(
        self, key: str, staged: Path, policy: TrustPolicy, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        """Entry ``key`` into the empty folder ``staged``, checked by ``policy`` and against
        ``inputs`` (:func:`.trust.check_inputs`): its ``build.json``, or None when the remote
        has none or cannot be reached. A pointer's unit is not fetched (the caller does).
        :class:`.trust.Untrusted` says why an entry is refused."""
        if self.down is not None:
            return None
        name = manifest_name(key)
        try:
            raw = self.store.read(name, MAX_MANIFEST_BYTES)
            if raw is None:
                return None
            return self._unpack(key, raw, staged, policy, inputs)
        except (RemoteDown, RemoteForbidden) as exc:
            self._unusable(exc)
            return None
        except ValueError as exc:  # larger than it may be
            self._refused.add(key)
            raise Untrusted(str(exc)) from None
        except Untrusted:
            self._refused.add(key)
            raise

    def _unpack(
        self, key: str, raw: bytes, staged: Path, policy: TrustPolicy, inputs: dict[str, str]
    ) -> dict[str, Any]:
        where = f"{self.url}/{manifest_name(key)}"
        try:
            manifest = json.loads(raw)
        except ValueError:
            raise Untrusted(f"{where} is not JSON") from None
        if (
            not isinstance(manifest, dict)
            or manifest.get("format") != MANIFEST_FORMAT
            or not isinstance(manifest.get("build.json"), str)
        ):
            raise Untrusted(f"{where} is not a build cache manifest of format {MANIFEST_FORMAT}")
        (staged / ENTRY_FILE).write_bytes(manifest["build.json"].encode())
        if (signature := manifest.get("signature")) is not None:
            try:
                (staged / SIGNATURE_FILE).write_bytes(base64.b64decode(str(signature), validate=True))
            except binascii.Error:
                raise Untrusted(f"{where}: its signature is not base64") from None
        meta = read_meta(staged, key, policy)  # the signature and the key, before any blob is fetched
        if "unit" in meta:
            if not isinstance(meta["unit"], str) or not KEY_NAME.match(meta["unit"]):
                raise Untrusted(f"{where} points outside the cache ({meta['unit']!r})")
            return meta
        check_inputs(staged, meta, inputs, policy)
        files = meta.get("sha256")
        if not isinstance(files, dict) or not all(
            isinstance(n, str) and FILE_NAME.match(n) and isinstance(d, str) and SHA256.match(d)
            for n, d in files.items()
        ):
            raise Untrusted(f"{where} lists no valid checksums")
        for file, digest in files.items():
            self._download(file, digest, staged)
        executable = manifest.get("executable", [])
        for file in executable if isinstance(executable, list) else []:
            if file in files:
                os.chmod(staged / file, 0o777 & ~umask())
        check_files(staged, meta, policy)  # as a local entry is checked, once it is all here
        return meta

    def _download(self, file: str, digest: str, staged: Path) -> None:
        blob = blob_name(digest)
        running = hashlib.sha256()
        try:
            self.store.download(blob, staged / file, MAX_FILE_BYTES, running.update)
        except FileNotFoundError:
            self._refused.add(digest)
            raise Untrusted(f"{self.url}/{blob} ({file}) is missing") from None
        except ValueError as exc:
            self._refused.add(digest)
            raise Untrusted(str(exc)) from None
        if running.hexdigest() != digest:
            self._refused.add(digest)
            raise Untrusted(f"{self.url}/{blob} ({file}) fails its checksum")

    # -- writing -------------------------------------------------------------------------
    def upload(self, entry: Path, key: str) -> None:
        """Publish the local entry ``entry`` (filed under ``key``; a pointer with its unit):
        its blobs, then its manifest. Nothing when the remote has it already (unless it was
        refused), is read only or unusable."""
        if self.down is not None or self.read_only:
            return
        try:
            self._upload(entry, key)
        except RemoteForbidden as exc:
            self.read_only = True
            self.say(
                f"remote build cache {self.url}: you may not write it ({exc}); what is built here stays local"
            )
        except (RemoteDown, FileNotFoundError) as exc:
            self._unusable(exc if isinstance(exc, RemoteDown) else RemoteDown(f"uploading: {exc}"))

    def _upload(self, entry: Path, key: str, pointer: bool = True) -> None:
        if key not in self._refused and self.store.exists(manifest_name(key)):
            return
        raw = (entry / ENTRY_FILE).read_bytes()
        signature = entry / SIGNATURE_FILE
        meta = json.loads(raw)
        if isinstance(unit := meta.get("unit"), str) and KEY_NAME.match(unit) and pointer:
            self._upload(entry.parent.parent / unit[:2] / unit, unit, pointer=False)
        files: dict[str, str] = meta.get("sha256", {}) if "unit" not in meta else {}
        for file, digest in files.items():
            blob = blob_name(digest)
            if digest in self._refused or not self.store.exists(blob):
                self.store.publish(entry / file, blob)
                self._refused.discard(digest)
        manifest = {
            "format": MANIFEST_FORMAT,
            "key": key,
            "build.json": raw.decode(),
            "signature": base64.b64encode(signature.read_bytes()).decode() if signature.exists() else None,
            "executable": sorted(f for f in files if os.stat(entry / f).st_mode & stat.S_IXUSR),
        }
        self.store.publish(json.dumps(manifest).encode(), manifest_name(key))
        self._refused.discard(key)


class TieredCache(BuildCache):
    """The local :class:`.cache.BuildCache` with a remote tier behind it: a miss is looked up
    remotely (once per key and session) before it is built, a build is uploaded once
    published, and with a ``farm`` (:mod:`.farm`) units are compiled there instead of here,
    each landing in the remote tier and fetched from it."""

    def __init__(
        self,
        root: Path,
        progress: Callable[[str], None] | None = None,
        *,
        tier: RemoteTier,
        farm: Farm | None = None,
        trust: TrustPolicy | None = None,
    ) -> None:
        super().__init__(root, progress, trust=trust)
        self.tier = tier
        self.farm = farm
        self._asked: set[str] = set()
        self._unsigned_said = False

    def lookup(self, spec: BuildSpec) -> BuildResult | None:
        found = super().lookup(spec)
        if found is None and spec.key not in self._asked:
            self._asked.add(spec.key)
            if self._fetch(spec.key, spec.inputs):
                found = super().lookup(spec)
        return found

    def _fetch(self, key: str, inputs: Sequence[BuildInput], locked: bool = False) -> bool:
        """Install remote entry ``key`` (a pointer with its unit) into this cache; whether it
        was. ``locked``: this process holds the entry's lock already."""
        if self.tier.down is not None or not self.writable():
            return False
        if locked:
            return self._install(key, inputs)
        with self._lock_key(key):
            return self._install(key, inputs)

    def _install(self, key: str, inputs: Sequence[BuildInput], pointer: bool = True) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".remote-") as tmp:
            staged = Path(tmp) / "entry"
            staged.mkdir()
            try:
                meta = self.tier.fetch(key, staged, self.trust, {i.name: i.digest for i in inputs})
            except Untrusted as exc:
                self.progress(f"remote cache entry refused: {exc}: building it again")
                return False
            if meta is None:
                return False
            unit = meta.get("unit")  # a case of a shared unit: the unit too
            if isinstance(unit, str) and (not pointer or not self._unit_here(unit, inputs)):
                return False
            final = self.entry_of(key)
            _clear(final)
            os.rename(staged, final)
        return True

    def _unit_here(self, unit: str, inputs: Sequence[BuildInput]) -> bool:
        if (self.entry_of(unit) / ENTRY_FILE).exists():
            return True
        with self._lock_key(unit):
            return (self.entry_of(unit) / ENTRY_FILE).exists() or self._install(unit, inputs, pointer=False)

    def _publish(self, spec: BuildSpec, case_dir: Path, seconds: float) -> BuildResult:
        result = super()._publish(spec, case_dir, seconds)
        if result.environment is None:
            self._upload(spec)
        return result

    def link(self, spec: BuildSpec, unit: BuildResult) -> None:
        super().link(spec, unit)
        if (self.entry(spec) / ENTRY_FILE).exists():
            self._upload(spec)

    def _upload(self, spec: BuildSpec) -> None:
        self._upload_entry(self.entry(spec), spec.key)

    def _upload_entry(self, entry: Path, key: str) -> bool:
        """Upload ``entry`` (filed under ``key``), unless readers check signatures this process
        cannot make: a verify key without a signing key reads the team's signed entries, and
        what it builds stays local (uploaded, it would only be refused by every reader, and
        replace a good one another signer could have written). Whether it may upload."""
        if self.trust.verify_key is not None and self.trust.signing_key is None:
            if not self._unsigned_said:
                self._unsigned_said = True
                self.progress(
                    f"remote build cache {self.tier.url}: units built here stay local (a verify key "
                    "and no signing key: its readers accept only signed units)"
                )
            return False
        self.tier.upload(entry, key)
        return True

    def push(self) -> tuple[int, int]:
        """Upload every entry of the local cache that the remote lacks (a cache filled before
        the team had a remote, or on a host that had none), each checked first exactly as a
        run's lookup checks it, so nothing refused here is spread. Returns the entries offered
        and those refused; raises :class:`.cache.CacheUnusable` when the remote cannot take
        them (down, read only, or a verify key without a signing key)."""
        offered = refused = 0
        for entry in sorted(self.root.glob("??/*")):
            if not KEY_NAME.match(entry.name) or not (entry / ENTRY_FILE).exists():
                continue
            if self._read(entry) is None:  # said why, through progress
                refused += 1
                continue
            if not self._upload_entry(entry, entry.name) or self.tier.down or self.tier.read_only:
                why = self.tier.down or ("read only" if self.tier.read_only else "see above")
                raise CacheUnusable(f"the remote build cache {self.tier.url} takes no entries: {why}")
            offered += 1
        return offered, refused

    def capacity(self) -> tuple[int, int]:
        return super().capacity() if self.farm is None else self.farm.capacity()

    def _compile(
        self, specs: Sequence[BuildSpec], jobs: int, cores: float | None = None, deadline: float | None = None
    ) -> dict[str, BuildResult]:
        """Compile ``specs`` here, or on the farm: each unit as one task, fetched from the
        remote tier when it is done (this process holds their locks)."""
        if self.farm is None:
            return super()._compile(specs, jobs, cores, deadline)
        if self.tier.down is not None:
            raise CacheUnusable(
                f"the build farm {self.farm.address} delivers through the remote build cache "
                f"{self.tier.url}, which is unusable ({self.tier.down})"
            )
        results: dict[str, BuildResult] = {}
        self._compile_started()
        for spec, outcome in self.farm.build(specs, self.tier.url, deadline, self.clock, self.progress):
            if (failure := outcome.failure) is not None:  # the farm's host, not the source: never cached
                results[spec.key] = BuildResult(
                    False, self.entry(spec), outcome.seconds, failure.line, environment=failure
                )
                continue
            self._asked.discard(spec.key)
            found = super().lookup(spec) if self._fetch(spec.key, spec.inputs, locked=True) else None
            if found is None:
                raise CacheUnusable(
                    f"{spec.label}: built on {self.farm.address}, but not usable from the remote build "
                    f"cache {self.tier.url} ({self.tier.down or 'see the line above'})"
                )
            results[spec.key] = found
        return results
