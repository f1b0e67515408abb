"""A content-addressed cache of compiled harnesses, shared by processes and pytest-xdist workers.

Each entry is a directory named by the hash of everything that decides the build (source
text, compiler command, compiler and library versions). It is built in a private temp
directory and published with one ``os.rename``, so a reader sees a complete entry or none.
A file lock per entry makes sure concurrent workers never build the same entry twice.
A failed compile is an entry too: its ``build.json`` says so and holds the first error.
Keys do not depend on where things are installed (:func:`portable` puts placeholders for the
install roots into the command; what lies there is covered by the salt), so a cache filled on
another machine (a teammate, CI) is found; ``build.json`` records the key and a SHA-256 of
every file of the entry. Before an entry is used it is checked (:mod:`.trust`): no links, no
path leaving the cache, its sums, who could have written it and, when configured, its
signature; an entry that fails is never executed and is built again.
An entry may also point at another one (:meth:`BuildCache.link`): a case built as part of a
shared translation unit is found under its own key, and leads to the shared executable.
A cache the user cannot write serves what it holds without taking locks; a build it lacks
stops the session with :class:`CacheUnusable` rather than going elsewhere, so every verdict
comes from the cache the user named.

Builds run through ninja (:mod:`.ninja`), in parallel, bounded by cores and by memory.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from ..verdict import UnusableEnvironment
from . import ninja
from . import progress as progress_module
from .failure import Failure, classify
from .handles import CheckedFiles
from .inputs import STAGED, BuildInput, stage, unstage
from .progress import UnitEstimate
from .trust import (
    ENTRY_FILE,
    KEY_NAME,
    TrustPolicy,
    Untrusted,
    check_files,
    check_folder,
    check_inputs,
    check_root,
    file_digests,
    lock_mode,
    read_meta,
    read_nofollow,
    write_meta,
)

#: what :meth:`BuildCache.has` reads with: a count, not a check (:meth:`BuildCache.lookup` checks)
_UNCHECKED = TrustPolicy("any")
#: (placeholder, path) pairs a command's placeholders are filled with when it runs
Roots = tuple[tuple[str, str], ...]
ARTIFACT = "harness"


@dataclass(frozen=True)
class BuildSpec:
    """One translation unit to compile into one executable."""

    source: str  # the generated .cu text
    command: tuple[str, ...]  # nvcc command with {src} and {out} placeholders
    salt: str  # compiler version, library version and anything else the key must cover
    ram_bytes: int  # estimated peak RAM of this compile
    label: str  # what to call it in progress output
    roots: Roots = ()  # filled into the command when it runs; not part of the key
    #: its critical path alone and its CPU time, in seconds, by the backend's cost model; what
    #: progress estimates from (0: not known). Not part of the key
    path_s: float = 0.0
    cpu_s: float = 0.0
    #: the names of ``roots`` whose files are the kernel's source besides the unit itself: a
    #: failed compile is cached as a verdict only for a diagnostic in one of them
    #: (:mod:`.failure`). Not part of the key
    sources: tuple[str, ...] = ()
    #: what the build reads under its roots, with the digests they were checked with
    #: (:mod:`.inputs`): recorded in the entry's manifest, and staged for a signed build. Not
    #: part of the key (the salt and the command cover them)
    inputs: tuple[BuildInput, ...] = ()

    @property
    def key(self) -> str:
        digest = hashlib.sha256()
        for part in (self.source, "\0".join(self.command), self.salt):
            digest.update(part.encode())
            digest.update(b"\0\0")
        return digest.hexdigest()[:32]


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    path: Path  # the entry's directory
    seconds: float
    first_error: str = ""
    #: why the compile failed when the run is to blame, not the source (killed, out of memory
    #: or disk space, a tool missing: :mod:`.failure`): it is not cached, no verdict may come
    #: of it, and a rerun with the cause removed compiles it
    environment: Failure | None = None
    #: its files as they were checked, which is what is run (:mod:`.handles`)
    files: CheckedFiles | None = field(default=None, compare=False, repr=False)

    @property
    def artifact(self) -> Path:
        """Where the entry's program lies: to name it. What runs it takes :meth:`runnable`."""
        return self.path / ARTIFACT

    def runnable(self, name: str = ARTIFACT) -> Path:
        """The entry's file ``name`` as ``/proc/PID/fd/N`` of its checked bytes, open for this
        process's life: a runner loads a unit once, by the name it is given."""
        return self._checked().kept(name)

    def running(self, name: str = ARTIFACT) -> AbstractContextManager[Path]:
        """The entry's file ``name`` as ``/proc/PID/fd/N`` of its checked bytes while a block
        runs: a program run once."""
        return self._checked().opened(name)

    def _checked(self) -> CheckedFiles:
        if self.files is None:  # a compile the run is to blame for: never run, never cached
            raise RuntimeError(f"{self.path} was not built here nor checked: nothing of it can run")
        return self.files

    @property
    def log(self) -> Path:
        return self.path / "build.log"


def portable(command: Sequence[str], roots: dict[str, Path]) -> tuple[tuple[str, ...], Roots]:
    """``command`` with each root path written as ``{name}``, and the (name, path) pairs that
    :class:`BuildSpec` fills back in. Longer roots are replaced first (one may hold another)."""
    pairs = sorted(((name, str(path)) for name, path in roots.items()), key=lambda p: -len(p[1]))
    out = []
    for part in command:
        for name, path in pairs:
            part = part.replace(path, "{" + name + "}")
        out.append(part)
    return tuple(out), tuple(pairs)


class CacheUnusable(UnusableEnvironment):
    """The cache cannot take a build this session needs (read-only for the user, or a folder
    the trust policy refuses): one line that says what to do, not a failure per case."""


def default_cache_dir() -> Path:
    if env := os.environ.get("TILECONFORM_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-tileconform"


def available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (a large number if it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 50


def available_cores() -> int:
    """The cores this process may run on (its affinity: taskset, a container's cpuset), which
    can be fewer than the host has."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parallel_jobs(
    specs: Sequence[BuildSpec],
    share: int = 1,
    cores: int | None = None,
    memory: int | None = None,
    per_job: int | None = None,
) -> int:
    """How many compiles may run at once: bounded by cores and by RAM (each compile needing the
    most any of ``specs`` needs, or ``per_job``), divided among ``share`` processes building at
    the same time (one per xdist worker)."""
    cores = cores or available_cores()
    memory = available_memory() if memory is None else memory
    per_job = per_job or max((s.ram_bytes for s in specs), default=1)
    return max(1, min(cores, int(memory * 0.85) // per_job) // max(1, share))


#: The name a unit's source has in its build directory (compile errors name it)
UNIT_SOURCE = "tu.cu"


class BuildCache:
    def __init__(
        self,
        root: Path,
        progress: Callable[[str], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_s: float | None = None,
        trust: TrustPolicy | None = None,
    ) -> None:
        """``progress`` is told what compiles run (:mod:`.progress`): the estimate at the
        start, each unit done, and a heartbeat every ``heartbeat_s`` of ``clock`` (default
        :data:`.progress.HEARTBEAT_S` when the build starts), and each entry refused.
        ``trust`` says whose entries are believed (default: :meth:`TrustPolicy.from_env`)."""
        self.root = root
        self.progress = progress or (lambda _msg: None)
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.trust = trust or TrustPolicy.from_env()
        self._seen: dict[Path, dict[str, os.stat_result]] = {}  # entries checked, their files as hashed
        self._staged: dict[str, str] = {}  # input name -> its private copy, while a signed build runs
        self._refused_root = False
        self._checked_root = False
        self._compile_started: Callable[[], None] = lambda: None  # :meth:`telling_compiles`

    @contextlib.contextmanager
    def telling_compiles(self, started: Callable[[], None]) -> Iterator[None]:
        """Within the block, call ``started`` as the compilers of each build start: work meant
        to run beside them (a backend making its first case's inputs) waits for this, so that
        it does not slow what starts them. Not called for a build with nothing to compile."""
        before, self._compile_started = self._compile_started, started
        try:
            yield
        finally:
            self._compile_started = before

    def entry(self, spec: BuildSpec) -> Path:
        return self.entry_of(spec.key)

    def entry_of(self, key: str) -> Path:
        return self.root / key[:2] / key

    def capacity(self) -> tuple[int, int]:
        """The cores and bytes of memory compiles may use (what units are planned for)."""
        return available_cores(), available_memory()

    def lookup(self, spec: BuildSpec) -> BuildResult | None:
        return self._read(self.entry(spec), inputs={item.name: item.digest for item in spec.inputs})

    def has(self, spec: BuildSpec) -> bool:
        """Whether ``spec`` has an entry (its own or a shared unit's), without reading or
        checking its files: a cheap count of what a run will not compile (:meth:`lookup`
        checks the files before an entry is used)."""
        path = self.entry(spec)
        for _ in range(2):  # an entry, or a pointer to a unit's entry
            try:  # a FIFO planted as build.json is refused, not waited on
                meta = json.loads(read_nofollow(path / ENTRY_FILE, _UNCHECKED))
            except (Untrusted, ValueError):
                return False
            if not (unit := meta.get("unit")):
                return True
            if not isinstance(unit, str) or not KEY_NAME.match(unit):
                return False
            path = self.root / unit[:2] / unit
        return False

    def _read(
        self, path: Path, pointer: bool = True, inputs: dict[str, str] | None = None
    ) -> BuildResult | None:
        """The entry at ``path`` if it passes every check (:mod:`.trust`) and was built from
        ``inputs`` (name: digest, :func:`check_inputs`); a refused entry is reported to
        ``progress`` and treated as missing, so it is built again, never run."""
        if not path.exists() and not path.is_symlink():
            return None  # the common miss: nothing to report
        try:
            self._check_root()
            check_folder(path.parent, self.trust)
            meta = read_meta(path, path.name, self.trust)
            if "unit" in meta:  # built as part of another entry of this cache
                unit = meta["unit"]
                if not pointer:
                    raise Untrusted(f"{path} points at a pointer")
                if not isinstance(unit, str) or not KEY_NAME.match(unit):
                    raise Untrusted(f"{path} points outside the cache ({unit!r})")
                return self._read(self.root / unit[:2] / unit, pointer=False, inputs=inputs)
            check_inputs(path, meta, inputs or {}, self.trust)
            if path not in self._seen:
                self._seen[path] = check_files(path, meta, self.trust)
            error = str(meta.get("first_error", ""))
            files = CheckedFiles(path, meta["sha256"], self.trust, self._seen[path])
            return BuildResult(bool(meta["ok"]), path, float(meta["seconds"]), error, files=files)
        except Untrusted as exc:
            self.progress(f"cache entry refused: {exc}: building it again")
            return None
        except (OSError, KeyError, TypeError, ValueError) as exc:
            self.progress(f"cache entry {path} is unreadable ({exc}): building it again")
            return None

    def _check_root(self) -> None:
        """The cache's own folder (a link to it is fine: the user named it) must pass the
        trust policy like every entry; refused, nothing in it is used or built."""
        try:
            if self._checked_root:  # the folders above it are checked once: they stay closed
                check_folder(self.root, self.trust, follow=True)
            else:
                check_root(self.root, self.trust)
                self._checked_root = True
        except Untrusted as exc:
            if not self._refused_root:
                self.progress(f"build cache refused: {exc}")
                self._refused_root = True
            raise

    def writable(self) -> bool:
        """Whether this process can add entries (the cache, or where it would be created)."""
        path = self.root
        while not path.exists() and path.parent != path:
            path = path.parent
        return os.access(path, os.W_OK | os.X_OK)

    def _require_writable(self, specs: Sequence[BuildSpec]) -> None:
        labels = ", ".join(spec.label for spec in specs[:3]) + (", ..." if len(specs) > 3 else "")
        try:
            check_root(self.root, self.trust)
        except Untrusted as exc:
            raise CacheUnusable(f"the build cache is not trusted: {exc}") from None
        if not self.writable():
            raise CacheUnusable(
                f"the build cache {self.root} is read-only for you and lacks {len(specs)} build(s) "
                f"({labels}): point --tile-cache-dir at a cache you can write, or have its owner build them"
            )

    def link(self, spec: BuildSpec, unit: BuildResult) -> None:
        """Publish ``spec``'s entry as a pointer to ``unit``, an entry whose executable also
        holds ``spec``'s case (a successful shared build). A pointer names the unit's key,
        never a path; one that cannot be written (a read-only cache) is left out: the case is
        then found by building, which says why it cannot."""
        if self.lookup(spec) is not None or not self.writable():
            return
        with self._lock(spec):
            if self.lookup(spec) is not None:
                return
            meta = {
                "key": spec.key,
                "unit": unit.path.name,
                "label": spec.label,
                "command": list(spec.command),
            }
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.root, prefix=".link-") as tmp:
                staged = Path(tmp) / "entry"
                staged.mkdir()
                write_meta(staged, meta, self.trust)
                final = self.entry(spec)
                _clear(final)  # an incomplete entry left by a crash, or a refused one
                os.rename(staged, final)

    def build(
        self,
        specs: Sequence[BuildSpec],
        jobs: int,
        claim: int | None = None,
        cores: float | None = None,
        deadline: float | None = None,
    ) -> dict[str, BuildResult]:
        """Make sure every spec has an entry; return them by key.

        Missing entries are claimed (locked) ``claim`` at a time (default ``jobs``) and built
        by one ninja run, ``jobs`` compiles at a time, so several processes given the same list
        share the work; entries another process is building are waited for, not rebuilt. A
        process that builds alone claims them all: ninja then starts each compile as soon as a
        job is free, instead of waiting for a round's slowest compile. ``cores`` is this
        process's share of the cores (default: all it may use), for the progress estimate.

        ``deadline`` (a time of ``clock``) bounds the build: once it has passed nothing more is
        started or waited for, compiles still running are stopped, and the units they had
        finished are cached; the specs not built by then are left out of the result.
        """
        results: dict[str, BuildResult] = {}
        pending = list({s.key: s for s in specs}.values())
        claim = max(1, claim or jobs)
        while pending:
            claimed: list[tuple[BuildSpec, FileLock]] = []
            theirs: list[BuildSpec] = []
            looked = {spec.key: self.lookup(spec) for spec in pending}
            if missing := [spec for spec in pending if looked[spec.key] is None]:
                self._require_writable(missing)  # before any lock: a read-only cache takes none
            for spec in pending:
                if found := looked[spec.key]:
                    results[spec.key] = found
                elif deadline is not None and self._left(deadline) == 0:
                    continue  # the time is up: built or not, nothing more is started
                elif len(claimed) < claim and (lock := self._try_lock(spec)) is not None:
                    if found := self.lookup(spec):  # published while we were looking
                        lock.release()
                        results[spec.key] = found
                    else:
                        claimed.append((spec, lock))
                else:
                    theirs.append(spec)
            if not claimed:
                pending = theirs
                break
            try:
                results.update(self._compile([s for s, _ in claimed], jobs, cores, deadline))
            finally:
                for _, lock in claimed:
                    lock.release()
            pending = theirs
        if pending:  # without this the wait looks like a hang
            self.progress(f"waiting for {len(pending)} translation unit(s) another process is compiling")
        for spec in pending:
            try:
                with self._lock(spec).acquire(timeout=-1 if deadline is None else self._left(deadline)):
                    found = self.lookup(spec)
            except Timeout:
                continue
            if found is None:  # the other process died before publishing: build it here
                found = self.build([spec], jobs, cores=cores, deadline=deadline).get(spec.key)
            if found is not None:
                results[spec.key] = found
        return results

    def _left(self, deadline: float) -> float:
        return max(0.0, deadline - self.clock())

    def _try_lock(self, spec: BuildSpec) -> FileLock | None:
        lock = self._lock(spec)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return None
        return lock

    def _lock(self, spec: BuildSpec) -> FileLock:
        return self._lock_key(spec.key)

    def _lock_key(self, key: str) -> FileLock:
        path = self.entry_of(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(path) + ".lock", mode=lock_mode(self.root))

    def _compile(
        self, specs: Sequence[BuildSpec], jobs: int, cores: float | None = None, deadline: float | None = None
    ) -> dict[str, BuildResult]:
        # the longest first: ninja starts them in this order, and the last to start is then
        # a short one (the estimate assumes this order too)
        specs = sorted(specs, key=lambda spec: -spec.path_s)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.root, prefix=".build-") as tmp:
                # absolute: ninja runs the commands in the folder itself
                return self._compile_in(Path(tmp).absolute(), specs, jobs, cores, deadline)
        except ninja.Unexpressible as exc:
            raise CacheUnusable(
                f"the build cannot run: {exc}; use a build cache (--tile-cache-dir), "
                "library sources and CUDA toolkit whose paths hold no line break"
            ) from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise CacheUnusable(
                f"the build cache {self.root} has no room for a build ({exc.strerror}: "
                f"{exc.filename}): free space there, or point --tile-cache-dir at a disk with room; "
                "nothing of this build was cached"
            ) from None

    def _compile_in(
        self,
        workdir: Path,
        specs: Sequence[BuildSpec],
        jobs: int,
        cores: float | None,
        deadline: float | None,
    ) -> dict[str, BuildResult]:
        """:meth:`_compile` in ``workdir``, a private folder of the cache removed afterwards. A
        signed build compiles from private copies of its inputs (:mod:`.inputs`)."""
        signed = self.trust.signing_key is not None
        self._staged = stage((i for s in specs for i in s.inputs), workdir / STAGED) if signed else {}
        compiles = []
        for spec in specs:
            case_dir = workdir / spec.key
            case_dir.mkdir()
            src = case_dir / UNIT_SOURCE
            src.write_text(spec.source)
            out = case_dir / ARTIFACT
            roots = {**dict(spec.roots), **{i.name: self._staged[i.name] for i in spec.inputs if signed}}
            command = [part.format(src=src, out=out, **roots) for part in spec.command]
            estimate = UnitEstimate(spec.label, spec.path_s, spec.cpu_s)
            compiles.append(ninja.Compile(spec.key, command, out, src, case_dir / "build.log", estimate))
        ninja.write_build_file(workdir, compiles)
        finished: list[str] = []
        self._compile_started()
        try:
            ninja.run(
                workdir,
                compiles,
                jobs,
                cores or available_cores(),
                progress=self.progress,
                clock=self.clock,
                heartbeat_s=self.heartbeat_s or progress_module.HEARTBEAT_S,
                finished=finished,
                deadline=deadline,
            )
        except ninja.TimeUp:
            return self._keep_finished(specs, workdir, finished, "the build's time limit passed", True)
        except BaseException:
            # an interrupt (Ctrl-C, a CI job's timeout) keeps the units that were done, so the
            # next run starts from them instead of from nothing
            self._keep_finished(specs, workdir, finished, "interrupted")
            raise
        seconds = ninja.durations(workdir)
        return {
            spec.key: self._publish(spec, workdir / spec.key, seconds.get(spec.key, 0.0)) for spec in specs
        }

    def _keep_finished(
        self, specs: Sequence[BuildSpec], workdir: Path, finished: list[str], why: str, failures: bool = False
    ) -> dict[str, BuildResult]:
        """Cache the units ninja has ended. Its log holds those that succeeded, which is all an
        interrupt keeps: a failure seen then may be the interrupt's (a compiler killed before
        its exit status was written). With ``failures`` (a time limit, which stops ninja only
        once it has passed) a unit that failed before is kept too: it ended by itself."""
        seconds = ninja.durations(workdir)
        kept = {
            spec.key: self._publish(spec, workdir / spec.key, seconds.get(spec.key, 0.0))
            for spec in specs
            if spec.key in finished and (failures or spec.key in seconds)
        }
        self.progress(f"{why}: {len(kept)} finished translation unit(s) cached, {len(specs) - len(kept)} not")
        return kept

    def _publish(self, spec: BuildSpec, case_dir: Path, seconds: float) -> BuildResult:
        log_path = case_dir / "build.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        if self._staged and log:  # it names the copies: name the inputs, as an unsigned build would
            log = unstage(log, self._staged, spec.inputs)
            log_path.write_text(log)
        ok = (case_dir / ARTIFACT).exists()
        first_error = ""
        if not ok:
            roots = dict(spec.roots)
            sources = [case_dir, *(Path(roots[name]) for name in spec.sources if name in roots)]
            failure = classify(log, case_dir.parent, sources)
            if failure.environment:
                what = f"the compile {failure.cause.value} ({failure.line})"
                self.progress(f"{spec.label}: {what}: not a verdict, nothing cached")
                return BuildResult(False, self.entry(spec), seconds, failure.line, environment=failure)
            first_error = failure.line
        seen: dict[str, os.stat_result] = {}  # the files as hashed: what is run (:mod:`.handles`)
        meta = {
            "key": spec.key,
            "ok": ok,
            "seconds": seconds,
            "first_error": first_error,
            "label": spec.label,
            "command": list(spec.command),
            "inputs": {item.name: item.digest for item in spec.inputs},
            "sha256": (sums := file_digests(case_dir, self.trust, seen)),
        }
        write_meta(case_dir, meta, self.trust)
        final = self.entry(spec)
        _clear(final)  # left by a crashed build (no build.json) or refused (:meth:`_read`)
        os.rename(case_dir, final)
        files = CheckedFiles(final, sums, self.trust, seen)
        return BuildResult(ok, final, seconds, first_error, files=files)


def _clear(final: Path) -> None:
    """Make room for a new entry at ``final``: remove what is there, and a link standing in
    for the entry or its folder (publishing through it would write outside the cache)."""
    if final.parent.is_symlink():
        final.parent.unlink()
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        shutil.rmtree(final)
