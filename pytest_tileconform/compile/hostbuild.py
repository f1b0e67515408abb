"""Small host programs the plugin compiles itself (the virtual runtime, the case runner).

Each is built once per content (its sources, the C++ compiler's identity, the headers it
reads) into a cache directory named by that content's hash, so anything keyed by its path
changes whenever it does. Safe from several processes at once: a file lock per build, and the
result published with one ``os.rename``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from filelock import FileLock


class HostBuildError(RuntimeError):
    """A host program could not be built."""


def cxx() -> str:
    """The C++ compiler: ``$CXX`` or ``g++``."""
    return os.environ.get("CXX") or "g++"


@cache
def compiler_id(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise HostBuildError(f"C++ compiler {compiler!r} is not usable: {exc}") from None


def run_tool(command: Sequence[str], what: str) -> None:
    proc = subprocess.run(list(command), capture_output=True, text=True)
    if proc.returncode != 0:
        raise HostBuildError(f"{what} failed ({shlex.join(command)}):\n{proc.stdout}{proc.stderr}")


def once_path(cache_dir: Path, name: str, inputs: Sequence[bytes], artifact: str) -> Path:
    """``cache_dir/NAME-HASH/ARTIFACT``, where HASH covers ``inputs``: where :func:`build_once`
    puts the artifact, known without building it (build keys that name it can be computed
    before anything is compiled)."""
    digest = hashlib.sha256()
    for part in inputs:
        digest.update(hashlib.sha256(part).digest())
    return cache_dir / f"{name}-{digest.hexdigest()[:16]}" / artifact


def build_once(
    cache_dir: Path,
    name: str,
    inputs: Sequence[bytes],
    artifact: str,
    produce: Callable[[Path], None],
) -> Path:
    """:func:`once_path`; if it is not there yet, ``produce(directory)`` writes ``ARTIFACT``
    (and anything else) into a private directory that then becomes ``NAME-HASH``."""
    result = once_path(cache_dir, name, inputs, artifact)
    final = result.parent
    if result.exists():
        return result
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock"):
        if result.exists():
            return result
        tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}-"))
        try:
            produce(tmp)
            if not (tmp / artifact).exists():
                raise HostBuildError(f"building {name} did not produce {artifact}")
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return result
