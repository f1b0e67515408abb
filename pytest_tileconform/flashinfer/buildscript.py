"""The build of a unit: one compile to objects (its kernels and its harness, two translation units
side by side), two programs linked from them.

A unit's build is a shell script (:func:`build_script`) with the install roots written as
placeholders (:func:`portable_build`), so the build cache's key names what is compiled and how,
not where the toolchain and the sources happen to be installed.
"""

from __future__ import annotations

import shutil
import sys
from functools import cache
from pathlib import Path

from ..archs import arch_number
from ..compile import nvcc_pipeline
from ..compile.cache import UNIT_SOURCE, Roots, portable
from ..compile.inputs import FILE, TREE, BuildInput, digest, read_tree
from .axes import MoeCase
from .codegen import HARNESS_DIR, HARNESS_PART
from .configs import KernelConfig
from .nvcc_flags import nvcc_command
from .sources import FlashInferSources, build_roots

#: The virtual harness is linked next to the hardware one, under its name plus this.
VIRTUAL_SUFFIX = "-virtual"
#: Compiles run nvcc's passes side by side (:mod:`..compile.nvcc_pipeline`), by this interpreter
#: and this copy of the module (``-I``: only the standard library, whatever the environment says).
PIPELINE_SCRIPT = Path(nvcc_pipeline.__file__).resolve()
PYTHON = sys.executable or shutil.which("python3") or "/usr/bin/python3"


def kernel_config(case: MoeCase) -> KernelConfig:
    """The instantiation a case compiles to (its name is the case's entry in the unit)."""
    return KernelConfig(
        arch=case.sm,
        act=case.act,
        weight=case.weight,
        out=case.out,
        tile=case.tile,
        cluster=case.axes.cluster,
        swap_ab=case.axes.swap_ab,
        fusion=case.axes.fusion,
        epilogue=case.axes.epilogue or "",
        dynamic_cga=case.axes.dynamic_cluster is not None,
        mainloop=case.axes.mainloop or "",
        kernel_arch=arch_number(case.axes.kernel_arch) if case.axes.kernel_arch else 0,
    )


def compile_command(hardware_command: list[str]) -> list[str]:
    """The compile of a unit to objects (add ``-odir DIR``) that :func:`build_script` runs,
    from :func:`.nvcc_flags.nvcc_command` (``... --cudart=static SRC COMMON... -o OUT``).
    ``--no-compress`` keeps the cubins readable for the virtual device's resource table and
    changes no code."""
    cudart = hardware_command.index("--cudart=static")
    sources = hardware_command[cudart + 1 : hardware_command.index("-o")]
    return [hardware_command[0], *hardware_command[1:cudart], "--no-compress", "-c", *sources]


#: The unit's second translation unit, its harness (:data:`.codegen.HARNESS_PART`), written by
#: the build beside the objects: the unit's own file, included with the harness's macro defined.
HARNESS_SOURCE = "harness_part.cu"


def harness_part(unit: str) -> str:
    """The text of :data:`HARNESS_SOURCE` for a unit file named ``unit``, one folder up."""
    return f'#define {HARNESS_PART} 1\n#include "../{unit}"\n'


#: The build script :func:`build_script` runs with ``sh -c``: every path comes to it as an
#: argument (``$1`` the program to make, ``$2`` nvcc, ``$3`` the virtual runtime, ``$4`` and
#: ``$5`` the macro and the unit file's name of :func:`harness_part`, the macro empty for a unit
#: with its harness together, then the compile's own command), never as script text, so no path
#: is parsed by the shell, whatever it holds (spaces, quotes, ``$``); no argument holds a line
#: break, which a ninja build file cannot, nor a brace (the cache formats each argument). The
#: two links run side by side (each a host link of the same objects); either failing fails it.
SCRIPT = (
    'set -e; out=$1; nvcc=$2; runtime=$3; macro=$4; unit=$5; shift 5; objdir="$out.o.d"; mkdir -p "$objdir"; '
    'if [ -n "$macro" ]; then '
    f'printf \'#define %s 1\\n#include "../%s"\\n\' "$macro" "$unit" > "$objdir/{HARNESS_SOURCE}"; '
    f'set -- "$@" "$objdir/{HARNESS_SOURCE}"; fi; '
    '"$@" -odir "$objdir"; '
    '"$nvcc" --cudart=static -shared "$objdir"/*.o -o "$out" & link=$!; '
    f'if ! "$nvcc" --cudart=none "$objdir"/*.o "$runtime" -o "$out{VIRTUAL_SUFFIX}"; '
    "then wait $link; exit 1; fi; "
    'wait $link; rm -rf "$objdir"'
)


def front_end_command(hardware_command: list[str], src: Path, out: Path) -> list[str]:
    """``nvcc -cuda`` of ``src`` with :func:`.nvcc_flags.nvcc_command`'s flags (its front ends, no
    link; the output is the host's ``.ii``): what :mod:`.probe` runs, through
    :mod:`..compile.nvcc_pipeline` as the compiles are (its host and device front ends side by
    side: a first verdict's probe, run beside its compile, then ends before the compile does)."""
    cudart = hardware_command.index("--cudart=static")
    nvcc = [*hardware_command[:cudart], "-cuda", str(src), "-o", str(out)]
    return [PYTHON, "-I", str(PIPELINE_SCRIPT), *nvcc]


def build_script(hardware_command: list[str], runtime: Path, apart: bool) -> tuple[str, ...]:
    """One build, two programs: compile the unit to objects, then link the hardware harness (a
    shared library with static cudart, which the runner loads: :mod:`.runner`) and the virtual
    one (an executable on the project's runtime) from the same objects.

    With its harness ``apart`` (:func:`.codegen.harness_apart`) the unit's file is compiled twice
    in the one compile, side by side: as itself, the kernels exactly as FlashInfer's generated
    file has them, and as :data:`HARNESS_SOURCE`, the harness that calls them
    (:func:`.codegen.generate_translation_unit`). Its launcher is the unit's file, written by
    the cache into the folder of ``{out}`` (:data:`..compile.cache.UNIT_SOURCE`).

    ``hardware_command`` is :func:`.nvcc_flags.nvcc_command`; the compile (:func:`compile_command`)
    runs through :mod:`..compile.nvcc_pipeline`: nvcc's passes side by side, nvcc's objects but
    for the module id in the names of internal-linkage symbols.
    """
    pipeline = [PYTHON, "-I", str(PIPELINE_SCRIPT)]
    nvcc = hardware_command[0]
    return (
        "sh",
        "-c",
        SCRIPT,
        "sh",
        "{out}",
        nvcc,
        str(runtime),
        HARNESS_PART if apart else "",
        UNIT_SOURCE,
        *pipeline,
        *compile_command(hardware_command),
    )


def portable_build(
    config: KernelConfig,
    sources: FlashInferSources,
    cuda_home: Path,
    runtime: Path,
    cache_dir: Path,
    apart: bool,
) -> tuple[tuple[str, ...], Roots]:
    """The build script for ``config``'s arch (the same for every unit of an arch with its
    harness ``apart`` or not: :func:`build_script`), with the install roots as placeholders
    (:func:`.sources.build_roots`, and this tool's interpreter and pipeline script)."""
    command = nvcc_command(config, sources, Path("{src}"), Path("{out}"), cuda_home)
    roots = {
        **build_roots(sources, HARNESS_DIR, cuda_home, cache_dir),
        "python": Path(PYTHON),
        "tileconform": PIPELINE_SCRIPT.parent,
    }
    return portable(build_script(command, runtime, apart), roots)


@cache
def _harness_input() -> BuildInput:
    files = tuple(sorted(p.name for p in HARNESS_DIR.iterdir() if p.suffix in (".cu", ".h")))
    return BuildInput("harness", HARNESS_DIR, files, digest(TREE, read_tree(HARNESS_DIR, files)))


def build_inputs(
    sources: FlashInferSources, fingerprint: str, cache_dir: Path, runtime: Path, runtime_digest: str
) -> tuple[BuildInput, ...]:
    """What a unit's build reads under its roots (:mod:`..compile.inputs`): FlashInfer's sources
    (``fingerprint``, the one in the build's salt), the harness sources and, once its checked
    digest is known (``runtime_digest``, before any build), the virtual runtime under the cache."""
    inputs = [BuildInput("flashinfer", sources.root, sources.build_files, fingerprint), _harness_input()]
    if runtime_digest:
        inputs.append(
            BuildInput("cache", cache_dir, (runtime.relative_to(cache_dir).as_posix(),), runtime_digest, FILE)
        )
    return tuple(inputs)
