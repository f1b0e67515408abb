"""Which dense CUTLASS runner FlashInfer's autotuner tunes on each architecture, and the names its
config cache, logs and tactics blocklist give it.

The tactic lists are :mod:`.offered`'s (a runner's ``getConfigs()``, index = autotuner id). What
this adds, read from FlashInfer's Python side (``flashinfer/gemm/gemm_base.py``, parsed with
``ast``, not imported):

- the runner class: the ``TunableRunner`` whose ``get_valid_tactics`` returns
  ``range(module.<kind>_gemm_tactic_num())``, e.g. ``CutlassFp4GemmRunner`` for the fp4 modules;
- the custom ops it is tuned under: the names ``AutoTuner.choose_one`` is called with in the
  functions that build it (``fp4_gemm``; ``bf16_gemm`` and ``bf16_gemm_pdl_auto``). A blocklist
  entry is ``<custom op>::<runner class>`` (``TacticsBlocklist.filter``).

Which module an architecture loads follows the generator's ``supported_major_versions``: of the
modules of a kind whose majors hold the architecture's, the one generated for exactly that
architecture, else the oldest (``get_cutlass_fp4_gemm_module`` loads ``fp4_gemm_cutlass_sm103`` on
SM103 only and ``fp4_gemm_cutlass`` on the rest of SM10x/SM11x; SM121 loads the SM120 modules).
An architecture without a module of a kind has no CUTLASS tactic list of it here: FlashInfer's
SM12x fp8 ``cutlass`` runner (the groupwise kernel) offers only its default ``-1``; its SM90
``fp8_blockscale_gemm_sm90`` is not autotuned (the binding takes no tactic).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ..archs import arch_number
from ..dtypes import dtype_label
from ..flashinfer.pysource import parse_file
from .offered import DenseSourcesError, Family, Offered
from .unit import FAMILY_KINDS

#: FlashInfer's GEMM entry points, relative to the package directory
GEMM_BASE = Path("gemm") / "gemm_base.py"
#: a runner's output types as this package spells them, from the generator's ``dtype_list``
OUT_DTYPES = {"__nv_bfloat16": "bf16", "half": "fp16", "float": "fp32"}
#: a family's operand dtype (A and B) as matrices and results spell it, by the generator's kind
OPERANDS = {kind: act for act, kind in FAMILY_KINDS.items()}


@dataclass(frozen=True)
class Runner:
    """One dense runner as FlashInfer's autotuner knows it on one architecture."""

    arch: str
    family: Family
    runner_class: str
    custom_ops: tuple[str, ...]

    @property
    def operand(self) -> str:
        return OPERANDS.get(self.family.kind, self.family.kind)

    @property
    def outs(self) -> tuple[str, ...]:
        return tuple(OUT_DTYPES.get(d, d) for d in self.family.out_dtypes)

    @property
    def blocklist_keys(self) -> tuple[str, ...]:
        return tuple(f"{op}::{self.runner_class}" for op in self.custom_ops)

    def labels(self) -> list[str]:
        """The dtype labels of its cases, one per output type (``nvfp4-bf16``, as case ids spell them)."""
        return [dtype_label(self.operand, self.operand, out) for out in self.outs]


def family_for(offered: Offered, arch: str, kind: str) -> Family | None:
    """The module of ``kind`` that ``arch`` loads (see the module's docstring), or None."""
    major = arch_number(arch) // 10
    candidates = [f for f in offered.families if f.kind == kind and major in f.majors]
    exact = [f for f in candidates if f.arch == arch]
    if exact:
        return exact[0]
    return min(candidates, key=lambda f: arch_number(f.arch), default=None)


def chosen_families(offered: Offered, arch: str) -> list[Family]:
    """The module of each kind that ``arch`` loads, in the generator's order of kinds."""
    kinds = dict.fromkeys(f.kind for f in offered.families)
    return [f for f in (family_for(offered, arch, kind) for kind in kinds) if f is not None]


def runners(offered: Offered, arch: str, package: Path) -> tuple[list[Runner], list[Family]]:
    """The dense CUTLASS runners ``arch`` tunes, and the modules it loads that no ``TunableRunner``
    of ``gemm_base.py`` tunes (the autotuner gives them no ids)."""
    names = autotuner_names(package)
    tuned, untuned = [], []
    for family in chosen_families(offered, arch):
        if family.kind in names:
            runner_class, ops = names[family.kind]
            tuned.append(Runner(arch, family, runner_class, ops))
        else:
            untuned.append(family)
    return tuned, untuned


def autotuner_names(package: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Kind -> (runner class, custom ops) read from ``gemm_base.py`` beside the generator."""
    path = package / GEMM_BASE
    if not path.is_file():
        raise DenseSourcesError(f"FlashInfer's GEMM entry points {path} are missing")
    tree = parse_file(path)
    classes: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            kind = _tuned_kind(node)
            if kind is not None:
                classes.setdefault(kind, node.name)
    ops: dict[str, list[str]] = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        built = {
            n.attr.removeprefix("cutlass_").removesuffix("_gemm_runner")
            for n in ast.walk(function)
            if isinstance(n, ast.Attribute)
            and n.attr.startswith("cutlass_")
            and n.attr.endswith("_gemm_runner")
        }
        for kind in built & set(classes):
            for op in _custom_ops(function):
                if op not in ops.setdefault(kind, []):
                    ops[kind].append(op)
    return {kind: (name, tuple(ops.get(kind, ()))) for kind, name in classes.items()}


def _tuned_kind(node: ast.ClassDef) -> str | None:
    """``fp4`` for a class whose ``get_valid_tactics`` returns ``range(module.fp4_gemm_tactic_num())``."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "get_valid_tactics":
            for n in ast.walk(item):
                if isinstance(n, ast.Attribute) and n.attr.endswith("_gemm_tactic_num"):
                    return n.attr.removesuffix("_gemm_tactic_num")
    return None


def _custom_ops(function: ast.FunctionDef) -> list[str]:
    """The string names ``choose_one`` is called with in ``function``: a literal, ``custom_op=``
    a literal, or a variable and every literal assigned to it there."""
    assigned: dict[str, list[str]] = {}
    for n in ast.walk(function):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            for target in n.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(n.value.value)
    found: list[str] = []
    for n in ast.walk(function):
        if not (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "choose_one"
        ):
            continue
        given = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "custom_op"), None)
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            found.append(given.value)
        elif isinstance(given, ast.Name):
            found += assigned.get(given.id, [])
    return found
