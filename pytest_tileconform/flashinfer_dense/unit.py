"""One case's translation unit and its build: FlashInfer's rendered template for the case's output
type and CTA shape (both swap_ab instantiations, as its JIT renders it), followed by the family's
harness, compiled with the flags FlashInfer's generator gives the family and linked with the
virtual runtime.

A unit holds one output type and CTA shape, as each file FlashInfer's JIT renders does, so the
tactics that differ only in swap_ab (and, where the template instantiates both schedulers, in
stream-K) share one build. The build command names the install roots as
placeholders (:func:`..compile.cache.portable`): the cache key says what is compiled and how, not
where the toolkit and the sources lie. The unit names the digest of the harness headers it
includes, so a build of an older harness is never served from the cache.

SM103's own fp4 module (``fp4_gemm_cutlass_sm103``) renders three templates: its K768 tiles one
file each, its K128/K256 tiles two per CTA shape (the TMA and the 256-bit-store epilogues, between
which its runner picks at run time), which include ``fp4_gemm_template_sm100.h`` under one include
guard in two namespaces: two translation units FlashInfer links, never one. Such a unit holds both
files and the harness as parts of one source, each compiled alone (``-DTILECONFORM_PART``) and
linked. SM103's other families are SM100's modules built for ``compute_103a``, driven by the SM100
harnesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..archs import KNOWN, arch_number
from ..compile.cache import Roots, portable
from ..compile.inputs import TREE, digest, read_tree
from ..dtypes import DTYPES, shape_label
from ..flashinfer.nvcc_flags import (
    _BUILD_CUDA_FLAGS,
    _JIT_SPEC_CUDA_FLAGS,
    COMMON_NVCC_FLAGS,
    sm100_gencode,
    sm120_gencode,
)
from ..flashinfer.sources import FlashInferSources, build_roots, cuda_version, find_cublas_include
from ..matrix.cases import Case
from ..verdict import NotJudgeable
from .axes import DenseAxes
from .generator import read_recipe
from .offered import GENERATOR, Family, Offered, Tactic

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
#: The activation type of a case -> the ``KIND`` of FlashInfer's ``gen_gemm_smNNN_module_cutlass_KIND``
FAMILY_KINDS = {"mxfp8": "mxfp8", "nvfp4": "fp4", "fp8_e4m3": "fp8", "bf16": "bf16"}

#: ``$1`` the program to make, ``$2`` nvcc, ``$3`` the virtual runtime, then the compile to objects;
#: every path comes as an argument, never as script text
SCRIPT = (
    'set -e; out=$1; nvcc=$2; runtime=$3; shift 3; "$@" -o "$out.o"; '
    '"$nvcc" --cudart=none "$out.o" "$runtime" -o "$out"; rm -f "$out.o"'
)
#: the same for a unit of ``$4`` kernel parts: parts 0 (the harness) to ``$4`` compiled side by side
#: (each waited for before a failure ends the build), then linked
PARTS_SCRIPT = (
    'set -e; out=$1; nvcc=$2; runtime=$3; parts=$4; shift 4; pids=""; '
    'for p in $(seq 0 "$parts"); do "$@" -DTILECONFORM_PART="$p" -o "$out.$p.o" & pids="$pids $!"; done; '
    'failed=0; for pid in $pids; do wait "$pid" || failed=$?; done; [ "$failed" -eq 0 ] || exit "$failed"; '
    'set --; for p in $(seq 0 "$parts"); do set -- "$@" "$out.$p.o"; done; '
    '"$nvcc" --cudart=none "$@" "$runtime" -o "$out"; rm -f "$@"'
)


class NotOffered(ValueError):
    """FlashInfer offers no tactic, or has no harness here, for a case."""


def harnessed_archs() -> tuple[str, ...]:
    """The known archs of the majors whose families this backend has a harness for
    (``harness/<module>_<arch>.h``): FlashInfer's JIT builds a module for every device of the majors its
    generator names (``supported_major_versions=[12]``: SM121 runs the sm120 module), and
    :func:`family_of` holds each case to the release's own majors."""
    majors = {arch_number(p.stem.rpartition("_")[2]) // 10 for p in HARNESS_DIR.glob("*_sm*.h")}
    return tuple(a for a in KNOWN if arch_number(a) // 10 in majors)


def harness_name(family: Family) -> str:
    """The harness header of ``family``: its module name, with the arch its generator builds for
    where the module does not name one (SM100's ``fp4_gemm_cutlass`` -> ``fp4_gemm_cutlass_sm100``)."""
    suffix = f"_{family.arch}"
    return f"{family.module}{'' if family.module.endswith(suffix) else suffix}.h"


def family_of(offered: Offered, case: Case[DenseAxes], release: str = "these sources") -> Family:
    """The JIT module that instantiates ``case``'s kernels (its arch's, else the one whose
    supported majors take it: sm121 runs the sm120 module). NotJudgeable for a family this
    backend has no harness for: the tool's limit, not FlashInfer's; and for one it has a harness
    for that ``release`` does not generate (an older release, before the family): no verdict on
    a kernel the release does not have."""
    kind = FAMILY_KINDS.get(case.act)
    candidates = [f for f in offered.families if f.kind == kind and case.act == case.weight]
    for family in sorted(candidates, key=lambda f: f.arch != case.arch):
        if family.arch == case.arch or case.sm // 10 in family.majors:
            if not (HARNESS_DIR / harness_name(family)).is_file():
                raise NotJudgeable(f"{family.module} has no harness in this backend yet")
            return family
    for harness in sorted(HARNESS_DIR.glob(f"{kind}_gemm_cutlass_sm*.h")):
        arch = harness.stem.rpartition("_")[2]
        if case.act == case.weight and arch_number(arch) // 10 == case.sm // 10:
            raise NotJudgeable(
                f"not in this release: {release} does not ship {harness.stem} (its "
                f"{GENERATOR.as_posix()} has no gen_gemm_{arch}_module_cutlass_{kind}), so no "
                f"{case.act} tactic on {case.arch} is judged"
            )
    raise NotOffered(
        f"FlashInfer instantiates no dense CUTLASS GEMM for {case.act} x {case.weight} on {case.arch}"
    )


def tactic_of(family: Family, case: Case[DenseAxes]) -> Tactic:
    """The autotuner tactic whose configuration ``case`` is (its CTA shape, swap_ab, stream-K,
    cluster)."""
    wanted = (case.tile, case.axes.swap_ab, case.axes.stream_k, case.axes.cluster)
    for tactic in family.tactics:
        if (tactic.cta, tactic.swap_ab, tactic.stream_k, tactic.cluster) == wanted:
            return tactic
    offered = sorted(
        {(shape_label(t.cta), t.swap_ab, t.stream_k, shape_label(t.cluster)) for t in family.tactics}
    )
    raise NotOffered(
        f"{family.module} offers no tactic of CTA {shape_label(case.tile)} with swap_ab "
        f"{case.axes.swap_ab}, stream_k {case.axes.stream_k} and cluster {shape_label(case.axes.cluster)}; "
        f"it offers (CTA, swap_ab, stream_k, cluster) {offered}"
    )


@cache
def harness_fingerprint(folder: Path = HARNESS_DIR) -> str:
    """The digest of the harness headers in ``folder``. A unit's text only includes its family's
    header, so this is written into it: an edited harness changes every unit's cache key."""
    files = sorted(p.name for p in folder.glob("*.h"))
    return digest(TREE, read_tree(folder, files))


@dataclass(frozen=True)
class Unit:
    """What one case is built from: ``source`` is one translation unit when ``parts`` is 0; else
    it holds ``parts`` kernel files and the harness, each compiled alone (:data:`PARTS_SCRIPT`)."""

    family: Family
    tactic: Tactic
    source: str
    parts: int = 0


def make_unit(sources: FlashInferSources, offered: Offered, case: Case[DenseAxes]) -> Unit:
    family = family_of(offered, case, f"FlashInfer {sources.version}")
    tactic = tactic_of(family, case)
    cuda_type = DTYPES[case.out].cuda_type
    if cuda_type not in family.out_dtypes:
        raise NotOffered(f"{family.module} renders outputs {list(family.out_dtypes)}, not {cuda_type}")
    recipe = read_recipe(sources, f"gen_gemm_{family.arch}_module_cutlass_{family.kind}")
    m, n, k = tactic.cta
    templates = recipe.templates_for(tactic.cta)
    rendered = [t.render(type=cuda_type, cta_m=m, cta_n=n, cta_k=k) for t in templates]
    names = ", ".join(t.path.name for t in templates)
    harness = [
        f"// harness sources {harness_fingerprint()}",
        f"#define TILECONFORM_T {cuda_type}",
        f"#define TILECONFORM_CTA_M {m}",
        f"#define TILECONFORM_CTA_N {n}",
        f"#define TILECONFORM_CTA_K {k}",
        f"#define TILECONFORM_TILE_NAME {tactic.tile}",
        f'#include "{harness_name(family)}"',
    ]
    title = f"// {family.module}: {names} rendered as FlashInfer {sources.version}'s JIT does"
    if len(rendered) == 1:
        return Unit(family, tactic, "\n".join([title, rendered[0], *harness, ""]))
    # files that include one header under one include guard in two namespaces (SM103's TMA and
    # 256-bit-store epilogues): each its own translation unit, as FlashInfer compiles them
    parts = [title + ", each file its own translation unit (TILECONFORM_PART 1, 2, ...), the harness part 0"]
    for number, text in enumerate(rendered, 1):
        parts += [f"#{'if' if number == 1 else 'elif'} TILECONFORM_PART == {number}", text]
    parts += ["#else", *harness, "#endif", ""]
    return Unit(family, tactic, "\n".join(parts), len(rendered))


def nvcc_flags(sources: FlashInferSources, family: Family, arch: int, cuda_home: Path) -> list[str]:
    """FlashInfer's JIT flags for ``family`` on ``arch``: gen_jit_spec's and build_cuda_cflags'
    (:mod:`..flashinfer.nvcc_flags`), ``get_nvcc_flags_list`` for one device of ``arch`` (its
    gencode and the common flags), then the generator's ``extra_cuda_cflags``."""
    cuda = cuda_version(cuda_home)
    recipe = read_recipe(sources, f"gen_gemm_{family.arch}_module_cutlass_{family.kind}")
    system = [cuda_home / "include", *sources.system_include_dirs, find_cublas_include(cuda_home)]
    return [
        *_JIT_SPEC_CUDA_FLAGS,
        f"-I{HARNESS_DIR}",
        *(f"-I{d}" for d in sources.cccl_include_dirs),
        *(arg for d in system for arg in ("-isystem", str(d))),
        *_BUILD_CUDA_FLAGS,
        *(["-static-global-template-stub=false"] if cuda >= (12, 8) else []),
        *COMMON_NVCC_FLAGS,
        sm100_gencode(cuda, arch) if arch // 10 == 10 else sm120_gencode(arch, cuda),
        *COMMON_NVCC_FLAGS,
        *recipe.extra_flags,
    ]


def build_command(
    sources: FlashInferSources,
    family: Family,
    arch: int,
    cuda_home: Path,
    runtime: Path,
    cache_dir: Path,
    parts: int = 0,
) -> tuple[tuple[str, ...], Roots]:
    """The unit's build: compile to an object (``--no-compress`` keeps the cubins readable for the
    virtual device's kernel table; it changes no code), link it with the virtual runtime. A unit
    of ``parts`` kernel files compiles each part and its harness side by side, then links them."""
    nvcc = str(cuda_home / "bin" / "nvcc")
    compile_ = [nvcc, *nvcc_flags(sources, family, arch, cuda_home), "--no-compress", "-c", "{src}"]
    if parts:
        command = ("sh", "-c", PARTS_SCRIPT, "sh", "{out}", nvcc, str(runtime), str(parts), *compile_)
    else:
        command = ("sh", "-c", SCRIPT, "sh", "{out}", nvcc, str(runtime), *compile_)
    return portable(command, build_roots(sources, HARNESS_DIR, cuda_home, cache_dir))
