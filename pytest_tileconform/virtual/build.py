"""Building for the virtual device: the hardware build's nvcc command, linked against vcudart.

The virtual build compiles the same translation unit with the same flags as the hardware build,
so device code and host code are the same; only the runtime it links differs
(``--cudart=none`` plus ``libvcudart.a`` instead of the static cudart). Two flags are added:
``--no-compress`` (fat binary images stay uncompressed so :mod:`.resources` can read them; the
code in them is unchanged) and ``--cudart=none``. ``-lcuda`` is dropped: the virtual runtime
is the driver too.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..build.hostbuild import HostBuildError, build_once, compiler_id, cxx, run_tool

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
RUNTIME_SOURCE = RUNTIME_DIR / "vcudart.cpp"
RUNTIME_LIB = "libvcudart.a"

_CUDART_FLAGS = ("--cudart", "-cudart")


class VirtualBuildError(HostBuildError):
    """The virtual runtime or a program linked against it could not be built."""


def build_runtime(cache_dir: Path, cuda_home: Path, compiler: str | None = None) -> Path:
    """Compile vcudart once per (source, compiler, CUDA headers) and return ``libvcudart.a``.

    The library's directory is named by that hash, so a virtual nvcc command that names it
    changes whenever the runtime does, and build caches keyed by the command stay correct.
    Safe to call from several processes at once (:func:`hostbuild.build_once`).
    """
    compiler = compiler or cxx()
    include = cuda_home / "include"

    def produce(directory: Path) -> None:
        obj = directory / "vcudart.o"
        flags = ["-std=c++17", "-O2", "-fPIC", f"-I{include}"]
        run_tool([compiler, *flags, "-c", str(RUNTIME_SOURCE), "-o", str(obj)], "compiling vcudart")
        run_tool(["ar", "rcs", str(directory / RUNTIME_LIB), str(obj)], "archiving vcudart")
        obj.unlink()

    inputs = (
        RUNTIME_SOURCE.read_bytes(),
        compiler_id(compiler).encode(),
        (include / "cuda_runtime_api.h").read_bytes(),
        (include / "cuda.h").read_bytes(),
    )
    return build_once(cache_dir, "vcudart", inputs, RUNTIME_LIB, produce)


def virtual_command(command: Sequence[str], runtime: Path) -> list[str]:
    """The hardware build's nvcc command, turned into the virtual build's.

    Placeholders such as ``{src}`` and ``{out}`` pass through unchanged, so the result can be
    given to :class:`~pytest_tileconform.buildcache.BuildSpec` like the hardware command.
    """
    out: list[str] = []
    skip_next = False
    for arg in command:
        if skip_next:
            skip_next = False
            continue
        if arg in _CUDART_FLAGS:  # "--cudart static"
            skip_next = True
            continue
        if arg.startswith(tuple(f"{flag}=" for flag in _CUDART_FLAGS)) or arg == "-lcuda":
            continue
        out.append(arg)
    if not out or Path(out[0]).name != "nvcc":
        raise VirtualBuildError(f"not an nvcc command: {shlex.join(command)}")
    return [*out, "--no-compress", "--cudart=none", str(runtime)]


@dataclass(frozen=True)
class VirtualBuild:
    ok: bool
    executable: Path
    log: str


def build_virtual(source: str, command: Sequence[str], out_dir: Path, runtime: Path) -> VirtualBuild:
    """Compile ``source`` (a generated translation unit) with the virtual form of the hardware
    nvcc ``command`` (with ``{src}`` / ``{out}`` placeholders) into ``out_dir/harness``.

    For one-off builds; the flashinfer backend caches builds by giving
    :func:`virtual_command`'s result to its BuildCache instead.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / "tu.cu"  # not harness.cu: the unit #includes "harness.cu" itself
    src.write_text(source)
    exe = out_dir / "harness"
    cmd = [part.format(src=src, out=exe) for part in virtual_command(command, runtime)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = f"$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}"
    (out_dir / "build.log").write_text(log)
    return VirtualBuild(proc.returncode == 0 and exe.exists(), exe, log)
