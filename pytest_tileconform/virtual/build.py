"""The virtual runtime (``runtime/vcudart.cpp``), built once as a static library.

A program runs on the virtual device by linking ``libvcudart.a`` in place of the CUDA runtime
(``--cudart=none``; it is the driver too, so ``-lcuda`` is not needed). The FlashInfer backend
links each unit's virtual harness this way from the same objects as its hardware harness
(:func:`pytest_tileconform.flashinfer.buildscript.build_script`), so device and host code are
the same and only the runtime differs.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..compile.hostbuild import artifact_digest, build_once, compiler_id, cxx, once_path, run_tool

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
RUNTIME_SOURCE = RUNTIME_DIR / "vcudart.cpp"
RUNTIME_LIB = "libvcudart.a"


def _runtime_inputs(cuda_home: Path, compiler: str) -> tuple[bytes, ...]:
    """What the runtime library is built from: its source, the compiler and the CUDA headers."""
    include = cuda_home / "include"
    return (
        RUNTIME_SOURCE.read_bytes(),
        compiler_id(compiler).encode(),
        (include / "cuda_runtime_api.h").read_bytes(),
        (include / "cuda.h").read_bytes(),
    )


def runtime_path(cache_dir: Path, cuda_home: Path, compiler: str | None = None) -> Path:
    """Where :func:`build_runtime` puts ``libvcudart.a``, known without building it: build
    commands name it, so their cache keys can be looked up before anything is compiled."""
    return once_path(cache_dir, "vcudart", _runtime_inputs(cuda_home, compiler or cxx()), RUNTIME_LIB)


def build_runtime(cache_dir: Path, cuda_home: Path, compiler: str | None = None) -> Path:
    """Compile vcudart once per (source, compiler, CUDA headers) and return ``libvcudart.a``.

    The library's directory is named by that hash, so a build script that names it changes
    whenever the runtime does, and build caches keyed by the script stay correct.
    Safe to call from several processes at once, and checked before its path is handed out:
    every virtual harness links it, so a damaged or planted one is built again, never linked
    (:func:`..compile.hostbuild.build_once`).
    """
    compiler = compiler or cxx()
    include = cuda_home / "include"

    def produce(directory: Path) -> None:
        obj = directory / "vcudart.o"
        # unoptimized: it is built on a cold first verdict's critical path (1.3 CPU-s against
        # 2.9 with -O2), and what it runs is a handful of driver answers, memcpy and memset
        flags = ["-std=c++17", "-O0", "-fPIC", f"-I{include}"]
        run_tool([compiler, *flags, "-c", str(RUNTIME_SOURCE), "-o", str(obj)], "compiling vcudart")
        run_tool(["ar", "rcs", str(directory / RUNTIME_LIB), str(obj)], "archiving vcudart")
        obj.unlink()

    return build_once(cache_dir, "vcudart", _runtime_inputs(cuda_home, compiler), RUNTIME_LIB, produce)


def runtime_in_background(cache_dir: Path, cuda_home: Path) -> Future[str]:
    """:func:`build_runtime` begun in a thread; its result is the checked sum of the library
    (what a build that links it must name). A caller starts it before its other preparations so
    that a cold first verdict waits for its compile alone. The process waits for the thread at
    exit, so no build is left half-done; where nothing needed it, it cost a CPU-second once per
    cache, and its error (HostBuildError) is never raised."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="tileconform-vcudart")
    built = pool.submit(lambda: artifact_digest(build_runtime(cache_dir, cuda_home)))
    pool.shutdown(wait=False)
    return built
