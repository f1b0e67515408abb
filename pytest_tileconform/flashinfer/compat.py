"""What a FlashInfer release offers the harness, read from the release's own files.

Nothing here keeps a table of version numbers. Each answer comes from the sources being
judged, so a release never seen before is read the same way:

- :func:`launcher_interface` parses the ``INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM`` macro and
  the namespace of the launcher ``.inl``. The harness writes the 17-parameter form (with
  ``EpilogueSchedule_``, ``DYNAMIC_CGA_`` and ``SWAP_AB_``, FlashInfer >= 0.5.3) and calls the
  launcher in ``tensorrt_llm::kernels::cutlass_kernels_oss``; a release that has neither cannot
  be judged, and :func:`incompatibility` says exactly what is missing.
- Other differences (a header, field or type the harness uses that a release lacks or changed)
  are not looked for: the compile fails in the harness's own files, and :func:`harness_error`
  tells that failure apart from a verdict on the instantiation.
- :func:`generator_offers` says whether the release's ``generate_kernels.py`` emits a
  configuration at all (parsed, never executed): a tile FlashInfer does not ship can still be
  judged, but the table says so.

How a release builds its fused-MoE module (its nvcc flags) is read by
:mod:`~pytest_tileconform.flashinfer.nvcc_flags`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..compile.cache import UNIT_SOURCE
from .codegen import HARNESS_DIR
from .configs import KernelConfig
from .pysource import parse_file
from .sources import LAUNCHER_INL

MACRO = "INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM"
#: The parameters of the macro the harness's codegen writes, in order.
HARNESS_MACRO_PARAMS: tuple[str, ...] = (
    "ArchTag_",
    "DataType_",
    "WeightType_",
    "OutputType_",
    "EpilogueSchedule_",
    "EpilogueTag_",
    "FUSION_",
    "CTA_M_",
    "CTA_N_",
    "CTA_K_",
    "CGA_M_",
    "CGA_N_",
    "CGA_K_",
    "MXFPX_",
    "DYNAMIC_CGA_",
    "BIAS_",
    "SWAP_AB_",
)
HARNESS_NAMESPACE = "cutlass_kernels_oss"

_MACRO_RE = re.compile(r"#\s*define\s+" + MACRO + r"\s*\(([^)]*)\)")
_NAMESPACE_RE = re.compile(r"^\s*namespace\s+([A-Za-z_]\w*)\s*\{?", re.MULTILINE)


@dataclass(frozen=True)
class LauncherInterface:
    path: Path
    macro_params: tuple[str, ...] | None  # None: the macro is not defined there
    macro_line: int | None
    namespaces: tuple[str, ...]  # namespaces opened in the .inl, in order


def launcher_interface(data_dir: Path) -> LauncherInterface:
    """Parse the launcher ``.inl`` under ``data_dir`` (laid out like ``flashinfer/data``)."""
    path = data_dir / "csrc" / "nv_internal" / LAUNCHER_INL
    text = path.read_text(errors="replace")
    joined = text.replace("\\\n", " ")  # macro continuation lines
    found = _MACRO_RE.search(joined)
    params = None
    if found is not None:
        params = tuple(p.strip() for p in found.group(1).split(",") if p.strip())
    define = re.search(r"#\s*define\s+" + MACRO + r"\b", text)
    line = None if define is None else text.count("\n", 0, define.start()) + 1
    namespaces = tuple(dict.fromkeys(_NAMESPACE_RE.findall(text)))
    return LauncherInterface(path, params, line, namespaces)


def incompatibility(data_dir: Path) -> str | None:
    """Why the harness cannot be built against these sources, or None when it can be tried.

    The answer names the file, the line and what is missing, e.g. FlashInfer 0.5.0's macro
    without ``EpilogueSchedule_``, ``DYNAMIC_CGA_`` and ``SWAP_AB_``.
    """
    try:
        interface = launcher_interface(data_dir)
    except OSError as exc:
        return f"cannot read the MoE GEMM launcher: {exc}"
    where = f"csrc/nv_internal/{LAUNCHER_INL}"
    if interface.macro_params is None:
        return f"{where} defines no {MACRO} macro; the harness instantiates the launcher through it"
    if interface.macro_params != HARNESS_MACRO_PARAMS:
        have, want = interface.macro_params, HARNESS_MACRO_PARAMS
        missing = [p for p in want if p not in have]
        extra = [p for p in have if p not in want]
        parts = [f"{where}:{interface.macro_line}: {MACRO} takes {len(have)} parameters"]
        if missing:
            parts.append(f"without {', '.join(missing)}")
        if extra:
            parts.append(f"with unknown {', '.join(extra)}")
        if not missing and not extra:
            parts.append("in another order")
        return " ".join(parts) + f"; the harness writes the {len(want)}-parameter form ({', '.join(want)})"
    if HARNESS_NAMESPACE not in interface.namespaces:
        return (
            f"{where} declares the launcher in namespace(s) {', '.join(interface.namespaces)}, "
            f"not tensorrt_llm::kernels::{HARNESS_NAMESPACE}, where the harness calls it"
        )
    return None


#: ``FILE(LINE): error`` (nvcc's front ends) or ``FILE:LINE[:COL]: error`` (gcc); FILE may hold
#: spaces and parentheses (a build cache's path)
_LOCATED = re.compile(r"^(?P<file>.+?)(?:\(\d+\)|:\d+(?::\d+)?): (?:fatal )?error\b")


def harness_error(first_error: str) -> bool:
    """Whether a compile error (nvcc's first error line) is located in the tool's own code: the
    harness's files or the generated unit (a name or type the tool wrote that the release does
    not declare). Either does not fit these sources, which is no verdict on the instantiation.
    An error in FlashInfer's, TensorRT-LLM's or CUTLASS's files (a static_assert of the launcher,
    a CUTLASS builder refusing the tile) is a verdict and stays one."""
    location = _LOCATED.match(first_error.strip())
    if location is None:
        return False
    path = Path(location.group("file"))
    return path.name == UNIT_SOURCE or path.resolve().parent == HARNESS_DIR


# -- what FlashInfer's generator emits ---------------------------------------------------------


def _literal_assignments(function: ast.FunctionDef) -> dict[str, object]:
    found: dict[str, object] = {}
    for statement in function.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            try:
                found[statement.targets[0].id] = ast.literal_eval(statement.value)
            except ValueError:
                found[statement.targets[0].id] = ast.unparse(statement.value)
    return found


def generator_offers(package: Path, config: KernelConfig) -> bool | None:
    """Whether the release's ``generate_kernels.py`` emits ``config`` (SM120/121 NVFP4 x NVFP4
    only; None for anything else or when the generator cannot be read). Parsed, not run."""
    if config.arch not in (120, 121) or (config.act, config.weight) != ("nvfp4", "nvfp4"):
        return None
    path = package / "jit" / "gemm" / "cutlass" / "generate_kernels.py"
    if not path.is_file():
        return None
    try:
        tree = parse_file(path)
    except SyntaxError:
        return None
    function = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name == "generate_sm120_grouped_gemm_operations"
        ),
        None,
    )
    if function is None:
        return False  # no SM120 grouped GEMMs at all
    values = _literal_assignments(function)
    tiles = values.get("cta_shapes_mnk")
    clusters = values.get("cga_shapes", [[1, 1, 1]])
    fusions = values.get("epi_fusions")
    swaps = values.get("swap_ab", [False])
    if not isinstance(tiles, list) or not isinstance(clusters, list) or not isinstance(swaps, list):
        return None
    fusion_names = (
        {"finalize" if "finalize" in str(f) else "none" for f in fusions.split(",")}
        if isinstance(fusions, str)
        else {"none"}
    )
    return (
        list(config.tile) in tiles
        and list(config.cluster) in clusters
        and config.swap_ab in swaps
        and config.fusion in fusion_names
        and config.out in ("bf16", "fp16")
    )
