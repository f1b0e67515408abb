"""Locate FlashInfer's C++/CUDA sources (its package ``data/`` directory) and the CUDA toolkit.

Nothing here imports ``flashinfer``: importing it is slow and loads CUDA libraries. The
package directory is found with :func:`importlib.util.find_spec`, which does not execute the
package, and the version comes from the distribution metadata.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..compile.inputs import TREE, digest, read_tree
from ..files import write_atomic

ENV_SOURCES = "TILECONFORM_FLASHINFER_SOURCES"
DISTRIBUTION = "flashinfer-python"

# Relative to data/csrc/nv_internal; this exact spelling is what generate_kernels.py #includes.
LAUNCHER_INL = "tensorrt_llm/kernels/cutlass_kernels/moe_gemm/launchers/moe_gemm_tma_ws_launcher.inl"
#: SM90's mixed-input launcher, and the weight interleave its inputs need (FlashInfer's
#: ``interleave_moe_weights_for_sm90_mixed_gemm`` binding calls these kernels)
MIXED_LAUNCHER_INL = (
    "tensorrt_llm/kernels/cutlass_kernels/moe_gemm/launchers/moe_gemm_tma_ws_mixed_input_launcher.inl"
)
MIXED_UTILS_CU = "tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_mixed_utils.cu"


class FlashInferSourcesError(RuntimeError):
    """FlashInfer's sources, the CUDA toolkit or the cuBLAS headers could not be found."""


@dataclass(frozen=True)
class FlashInferSources:
    """A directory laid out like flashinfer-python's ``flashinfer/data``."""

    root: Path
    version: str

    @property
    def csrc(self) -> Path:
        return self.root / "csrc"

    @property
    def nv_internal(self) -> Path:
        return self.csrc / "nv_internal"

    @property
    def launcher_inl(self) -> Path:
        return self.nv_internal / LAUNCHER_INL

    @property
    def trtllm_include_dirs(self) -> list[Path]:
        """``extra_include_paths`` of ``gen_cutlass_fused_moe_module`` (flashinfer/jit/fused_moe.py),
        without its generated-sources directory."""
        nv = self.nv_internal
        return [
            nv,
            nv / "include",
            nv / "tensorrt_llm" / "cutlass_extensions" / "include",
            nv / "tensorrt_llm" / "kernels" / "cutlass_kernels" / "include",
            nv / "tensorrt_llm" / "kernels" / "cutlass_kernels",
        ]

    @property
    def cccl_include_dirs(self) -> list[Path]:
        """``CCCL_INCLUDE_DIRS`` (flashinfer/jit/env.py), passed with ``-I`` to override the CTK's."""
        cccl = self.root / "cccl"
        return [cccl / "cub", cccl / "libcudacxx" / "include", cccl / "thrust"]

    @property
    def cutlass_include_dirs(self) -> list[Path]:
        """``CUTLASS_INCLUDE_DIRS`` (flashinfer/jit/env.py)."""
        cutlass = self.root / "cutlass"
        return [cutlass / "include", cutlass / "tools" / "util" / "include"]

    @property
    def include_dirs(self) -> list[Path]:
        """``-I`` directories of FlashInfer's fused-MoE build, in its order."""
        return [*self.trtllm_include_dirs, *self.cccl_include_dirs]

    @property
    def system_include_dirs(self) -> list[Path]:
        """``-isystem`` directories from FlashInfer, without the CUDA toolkit's.

        Mirrors ``get_system_includes`` (flashinfer/jit/cpp_ext.py) minus the Python and
        TVM-FFI headers, which only the Python bindings need.
        """
        return [
            self.root / "include",
            self.csrc,
            *self.cutlass_include_dirs,
            self.root / "spdlog" / "include",
        ]

    @property
    def common_sources(self) -> list[Path]:
        """TensorRT-LLM host code the launcher links against (exception, string formatting,
        logger), as compiled into FlashInfer's fused-MoE module."""
        common = self.nv_internal / "cpp" / "common"
        return [common / "tllmException.cpp", common / "stringUtils.cpp", common / "logger.cpp"]

    @cached_property
    def _fingerprinted_files(self) -> list[tuple[str, str]]:
        """(path relative to ``root``, full path) of every file a harness build can include,
        directory by directory, each directory's files in path order (by components).

        Plain strings and ``os.walk`` rather than ``pathlib``: the plugin lists these ~4,000 files
        at every start to find its remembered fingerprint, and with a ``Path`` per file the
        listing is a large part of the time to a first verdict from a filled cache."""
        directories = [self.nv_internal, *self.cccl_include_dirs, *self.system_include_dirs]
        directories.remove(self.csrc)  # of csrc only nv_internal is used
        root = str(self.root) + os.sep
        listing: list[tuple[str, str]] = []
        for directory in directories:
            files = []
            for parent, _, names in os.walk(directory, followlinks=True):
                for name in names:
                    full = os.path.join(parent, name)
                    if os.path.isfile(full):
                        files.append((full.removeprefix(root), full))
            listing += sorted(files, key=lambda file: file[0].split(os.sep))
        return listing

    @cached_property
    def build_files(self) -> tuple[str, ...]:
        """Every file a harness build can include from here (relative to ``root``), in the
        order :attr:`fingerprint` reads them: what a signed build copies (:mod:`..compile.inputs`)."""
        return tuple(relative for relative, _ in self._fingerprinted_files)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 over the names, sizes and contents of every file a harness build can include
        from here: csrc/nv_internal and the CCCL, CUTLASS, FlashInfer and spdlog headers."""
        return digest(TREE, read_tree(self.root, self.build_files))

    def remembered_fingerprint(self, memo_dir: Path) -> str:
        """:attr:`fingerprint`, remembered in ``memo_dir`` under a signature of the files'
        names, sizes and modification times: reading every header takes seconds on a cold
        page cache, listing them a fraction of that. Like :attr:`fingerprint`, taken once per
        instance (the toolchain's salt and every unit's inputs ask for it)."""
        if memo_dir in self._remembered:
            return self._remembered[memo_dir]
        signature = hashlib.sha256()
        for relative, path in self._fingerprinted_files:
            stat = os.stat(path)
            signature.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        memo = memo_dir / f"sources-{signature.hexdigest()[:32]}.sha256"
        try:
            text = memo.read_text().strip()
        except OSError:
            text = ""
        if len(text) != 64:
            text = self.fingerprint
            write_atomic(memo, text + "\n")
        self._remembered[memo_dir] = text
        return text

    @cached_property
    def _remembered(self) -> dict[Path, str]:
        return {}

    @property
    def generate_kernels_py(self) -> Path | None:
        """FlashInfer's kernel-instantiation generator, when ``root`` is inside the package."""
        path = self.root.parent / "jit" / "gemm" / "cutlass" / "generate_kernels.py"
        return path if path.is_file() else None


def _version_from_dir(root: Path) -> str:
    for name in ("VERSION", "version.txt"):
        path = root / name
        if path.is_file():
            text = path.read_text().strip()
            if text:
                return text.splitlines()[0].strip()
    return "unknown"


def _installed_data_dir() -> Path:
    spec = importlib.util.find_spec("flashinfer")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    raise FlashInferSourcesError(
        f"flashinfer-python is not installed (no 'flashinfer' package with a data/ directory "
        f"on sys.path); install it or set {ENV_SOURCES} to a directory laid out like "
        f"flashinfer/data"
    )


def find_sources(override: str | os.PathLike[str] | None = None) -> FlashInferSources:
    """Find FlashInfer's sources: ``override``, else ``$TILECONFORM_FLASHINFER_SOURCES``, else
    the installed flashinfer-python package.

    An explicit directory takes its version from a ``VERSION`` or ``version.txt`` file in it
    ("unknown" without one); the installed package from its distribution metadata.
    """
    explicit = override if override is not None else os.environ.get(ENV_SOURCES)
    if explicit:
        root = Path(explicit).expanduser().resolve()
        origin = "argument" if override is not None else f"${ENV_SOURCES}"
        if not root.is_dir():
            raise FlashInferSourcesError(f"FlashInfer sources directory {root} ({origin}) does not exist")
        version = _version_from_dir(root)
    else:
        root = _installed_data_dir().resolve()
        try:
            version = importlib.metadata.version(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
    sources = FlashInferSources(root=root, version=version)
    required = [sources.launcher_inl, *sources.common_sources, *sources.cutlass_include_dirs]
    missing = [path for path in required if not path.exists()]
    if missing:
        listing = ", ".join(str(p) for p in missing)
        raise FlashInferSourcesError(f"FlashInfer sources at {root} are incomplete, missing: {listing}")
    return sources


def _is_cuda_home(path: Path) -> bool:
    return (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime.h").is_file()


def find_cuda_home() -> Path:
    """The CUDA toolkit, looked up like FlashInfer's ``get_cuda_path`` (flashinfer/jit/cpp_ext.py):
    ``$CUDA_HOME``, ``$CUDA_PATH``, the directory above ``nvcc`` on PATH, ``/usr/local/cuda``.

    Unlike FlashInfer, a candidate must hold ``bin/nvcc`` and ``include/cuda_runtime.h``, so an
    ``nvcc`` wrapper script in ``/usr/local/bin`` does not make ``/usr/local`` the toolkit.
    """
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value:
            if not _is_cuda_home(Path(value)):
                raise FlashInferSourcesError(f"${var}={value} has no bin/nvcc + include/cuda_runtime.h")
            return Path(value)
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates += [Path(nvcc).parent.parent, Path(nvcc).resolve().parent.parent]
    candidates.append(Path("/usr/local/cuda"))
    for candidate in candidates:
        if _is_cuda_home(candidate):
            return candidate
    raise FlashInferSourcesError(
        "CUDA toolkit not found: set CUDA_HOME, put nvcc on PATH or install to /usr/local/cuda "
        f"(tried {', '.join(map(str, candidates))})"
    )


def nvcc_build(cuda_home: Path) -> str:
    """The last line of ``nvcc --version`` (``Build cuda_13.0.r13.0/compiler.36424714_0``)."""
    try:
        out = subprocess.run(
            [str(cuda_home / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise FlashInferSourcesError(f"nvcc is not usable at {cuda_home}: {exc}") from None
    return out.strip().splitlines()[-1]


def build_salt(sources: FlashInferSources, cuda_home: Path, memo_dir: Path) -> str:
    """What every build from ``sources`` with this toolkit is keyed by besides its own text and
    command: the nvcc build, the FlashInfer version and the sources' fingerprint."""
    return f"{nvcc_build(cuda_home)}|flashinfer {sources.version}|{sources.remembered_fingerprint(memo_dir)}"


def cuda_version(cuda_home: Path) -> tuple[int, int]:
    """(major, minor) of the toolkit: from ``version.json``, else from ``nvcc --version``."""
    version_json = cuda_home / "version.json"
    if version_json.is_file():
        text = json.loads(version_json.read_text()).get("cuda", {}).get("version", "")
    else:
        nvcc = cuda_home / "bin" / "nvcc"
        try:
            text = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise FlashInferSourcesError(f"cannot run {nvcc} --version: {exc}") from exc
        found = re.search(r"release (\d+\.\d+)", text)
        text = found.group(1) if found else ""
    parts = re.match(r"(\d+)\.(\d+)", text)
    if parts is None:
        raise FlashInferSourcesError(f"cannot tell the CUDA version of the toolkit at {cuda_home}")
    return int(parts.group(1)), int(parts.group(2))


def find_cublas_include(cuda_home: Path | None = None) -> Path:
    """Directory with ``cublas_v2.h``, which TensorRT-LLM's cudaUtils.h includes.

    Looks in the nvidia-cublas wheel (``nvidia/cu13/include``, or ``nvidia/cublas/include`` for
    CUDA 12 wheels), found without importing anything, then in ``cuda_home/include``.
    """
    candidates: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        base = Path(location)
        candidates += [base / "cu13" / "include", base / "cublas" / "include"]
    if cuda_home is not None:
        candidates.append(cuda_home / "include")
    for directory in candidates:
        if (directory / "cublas_v2.h").is_file():
            return directory
    searched = ", ".join(str(d) for d in candidates) or "(nothing: no nvidia package, no CUDA_HOME)"
    raise FlashInferSourcesError(
        "cuBLAS headers (cublas_v2.h) not found; TensorRT-LLM's cudaUtils.h needs them. Install "
        f"the nvidia-cublas wheel or a CUDA toolkit with cuBLAS. Searched: {searched}"
    )


#: The roots of :func:`build_roots` whose files are the kernel's source (FlashInfer's release, the
#: harness the unit includes): an error located in one of them, or in the unit, is the kernel's
#: compile verdict; any other failed compile is the host's (:mod:`..compile.failure`).
SOURCE_ROOTS = ("flashinfer", "harness")


def build_roots(
    sources: FlashInferSources, harness: Path, cuda_home: Path, cache_dir: Path
) -> dict[str, Path]:
    """The install roots a unit built from FlashInfer's sources names as placeholders
    (:func:`..compile.cache.portable`), whichever of its kernel families the unit is: the build
    cache's key must not depend on where these are installed (their contents are in the salt,
    :func:`build_salt`, or in the unit's text: its harness's digest)."""
    return {
        "flashinfer": sources.root,
        "harness": harness,
        "cuda": cuda_home,
        "cublas": find_cublas_include(cuda_home),
        "cache": cache_dir,
    }
