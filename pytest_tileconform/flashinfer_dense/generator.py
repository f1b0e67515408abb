"""A dense GEMM family's translation units as FlashInfer's JIT makes them: its own ``.jinja``
templates, rendered for one output type and CTA shape, and the flags its generator compiles them
with.

Both are read from the generator function of the family (``gen_gemm_smNNN_module_cutlass_KIND`` in
``flashinfer/jit/gemm/core.py``), parsed, never imported: the templates it opens from
``FLASHINFER_CSRC_DIR`` (each with the CTA shapes of the loop that renders it) and the flags it adds
to ``get_nvcc_flags_list`` in ``extra_cuda_cflags``.
The templates of these families substitute plain names only (``{{ type }}``, ``{{ cta_m }}``); a
template with any other Jinja syntax is refused rather than rendered differently from FlashInfer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..flashinfer.nvcc_flags import RELEASE_FLAGS
from ..flashinfer.pysource import parse_file
from ..flashinfer.sources import FlashInferSources
from .offered import GENERATOR, DenseSourcesError

_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_OTHER_JINJA = re.compile(r"\{[%#]|\{\{")


Shape = tuple[int, int, int]


@dataclass(frozen=True)
class Template:
    """One template a generator renders, and the CTA shapes it renders it for (``None``: every
    shape the family offers)."""

    path: Path
    shapes: frozenset[Shape] | None = None

    def render(self, **values: str | int) -> str:
        """The template with each ``{{ name }}`` replaced, as ``jinja2.Template.render`` does."""
        text = self.path.read_text()
        names = set(_SUBSTITUTION.findall(text))
        if missing := names - set(values):
            raise DenseSourcesError(f"{self.path} needs {sorted(missing)}, not given")
        rendered = _SUBSTITUTION.sub(lambda m: str(values[m[1]]), text)
        if _OTHER_JINJA.search(rendered):
            raise DenseSourcesError(f"{self.path} uses Jinja beyond plain substitutions: not rendered here")
        return rendered


@dataclass(frozen=True)
class UnitRecipe:
    """What FlashInfer's generator does for one family: the templates it renders, each for its CTA
    shapes, and the flags it adds to the architecture's."""

    function: str  # the generator function, e.g. gen_gemm_sm120_module_cutlass_mxfp8
    templates: tuple[Template, ...]
    extra_flags: tuple[str, ...]

    def templates_for(self, cta: Shape) -> tuple[Template, ...]:
        """The templates the generator renders for ``cta``, in its order: one file each. SM103's fp4
        generator renders two for a K128/K256 shape (the TMA and the 256-bit-store epilogues), which
        its runner picks between at run time."""
        found = tuple(t for t in self.templates if t.shapes is None or cta in t.shapes)
        if not found:
            raise DenseSourcesError(f"{self.function} renders no template for CTA {cta}")
        return found


def read_recipe(sources: FlashInferSources, function_name: str) -> UnitRecipe:
    """The templates and extra flags of ``function_name`` in FlashInfer's GEMM generator."""
    path = sources.root.parent / GENERATOR
    if not path.is_file():
        raise DenseSourcesError(f"FlashInfer's GEMM generator {path} is missing")
    tree = parse_file(path)
    function = next(
        (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == function_name), None
    )
    if function is None:
        raise DenseSourcesError(f"{path}: no function {function_name}")
    templates = _templates(function, sources.csrc)
    if not templates:
        raise DenseSourcesError(f"{path}:{function.lineno} {function_name} opens no .jinja template")
    flags: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "gen_jit_spec":
            for keyword in node.keywords:
                if keyword.arg == "extra_cuda_cflags":
                    flags += _literal_flags(keyword.value)
    for flag in flags:
        if not RELEASE_FLAGS.fullmatch(flag):
            raise DenseSourcesError(
                f"{path} ({function_name}) asks nvcc for {flag!r}, not an option a release may set: refused"
            )
    return UnitRecipe(function_name, templates, tuple(flags))


def _templates(function: ast.FunctionDef, csrc: Path) -> tuple[Template, ...]:
    """Each ``with open(CSRC / NAME)`` of the generator: the template NAME is (a ``.jinja``
    literal, or the name a ``for NAME, ... in LIST`` around it takes from LIST's literals), with
    the shapes of the ``for cta_m, cta_n, cta_k in LIST`` inside it (LIST: a literal list of
    3-tuples assigned in the function)."""
    lists = _literal_lists(function)
    found: list[Template] = []

    def visit(node: ast.AST, loops: tuple[ast.For, ...]) -> None:
        if isinstance(node, ast.With):
            shapes = _cta_shapes(node, lists)
            for item in node.items:
                found.extend(
                    Template(csrc / name, shapes) for name in _opened(item.context_expr, loops, lists)
                )
        inner = (*loops, node) if isinstance(node, ast.For) else loops
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(function, ())
    return tuple(dict.fromkeys(found))


def _literal_lists(function: ast.FunctionDef) -> dict[str, list[tuple[object, ...]]]:
    """``NAME = [(...), ...]`` assignments of tuples of literals in ``function`` (the last one of a
    name wins, as the generators assign each list once)."""
    lists: dict[str, list[tuple[object, ...]]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError):
                continue
            if isinstance(value, list) and all(isinstance(v, tuple) for v in value):
                lists[node.targets[0].id] = value
    return lists


def _opened(
    expr: ast.expr, loops: tuple[ast.For, ...], lists: dict[str, list[tuple[object, ...]]]
) -> list[str]:
    """The template names ``open(CSRC / X)`` reads: X a ``.jinja`` literal, or a loop variable
    bound to the first field of a literal list's tuples."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "open"):
        return []
    if not expr.args or not isinstance(arg := expr.args[0], ast.BinOp) or not isinstance(arg.op, ast.Div):
        return []
    name = arg.right
    if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.endswith(".jinja"):
        return [name.value]
    if isinstance(name, ast.Name):
        for loop in loops:
            target, iterated = loop.target, loop.iter
            if isinstance(target, ast.Tuple) and isinstance(iterated, ast.Name) and target.elts:
                first = target.elts[0]
                if isinstance(first, ast.Name) and first.id == name.id:
                    values = [str(row[0]) for row in lists.get(iterated.id, [])]
                    if values and all(v.endswith(".jinja") for v in values):
                        return values
    return []


def _cta_shapes(block: ast.With, lists: dict[str, list[tuple[object, ...]]]) -> frozenset[Shape] | None:
    """The CTA shapes of the ``for cta_m, cta_n, cta_k in LIST`` loop inside ``block``."""
    for node in ast.walk(block):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Tuple)
            and len(node.target.elts) == 3
            and isinstance(node.iter, ast.Name)
        ):
            shapes = [_shape(row) for row in lists.get(node.iter.id, [])]
            if shapes and None not in shapes:
                return frozenset(s for s in shapes if s is not None)
    return None


def _shape(row: tuple[object, ...]) -> Shape | None:
    """``(cta_m, cta_n, cta_k)`` of three integers, else None."""
    if len(row) == 3:
        m, n, k = row
        if isinstance(m, int) and isinstance(n, int) and isinstance(k, int):
            return (m, n, k)
    return None


def _literal_flags(node: ast.expr) -> list[str]:
    """The string literals of ``nvcc_flags + [...]`` (the architecture's part is not literal)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_flags(node.left) + _literal_flags(node.right)
    if isinstance(node, ast.List):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []
