"""A dense GEMM family's translation unit as FlashInfer's JIT makes it: its own ``.jinja`` template,
rendered for one output type and CTA shape, and the flags its generator compiles it with.

Both are read from the generator function of the family (``gen_gemm_smNNN_module_cutlass_KIND`` in
``flashinfer/jit/gemm/core.py``), parsed, never imported: the template it opens from
``FLASHINFER_CSRC_DIR`` and the flags it adds to ``get_nvcc_flags_list`` in ``extra_cuda_cflags``.
The templates of these families substitute plain names only (``{{ type }}``, ``{{ cta_m }}``); a
template with any other Jinja syntax is refused rather than rendered differently from FlashInfer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..flashinfer.nvcc_flags import RELEASE_FLAGS
from ..flashinfer.sources import FlashInferSources
from .offered import GENERATOR, DenseSourcesError

_SUBSTITUTION = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_OTHER_JINJA = re.compile(r"\{[%#]|\{\{")


@dataclass(frozen=True)
class UnitRecipe:
    """What FlashInfer's generator does for one family: the template it renders and the flags it
    adds to the architecture's."""

    function: str  # the generator function, e.g. gen_gemm_sm120_module_cutlass_mxfp8
    template: Path
    extra_flags: tuple[str, ...]

    def render(self, **values: str | int) -> str:
        """The template with each ``{{ name }}`` replaced, as ``jinja2.Template.render`` does."""
        text = self.template.read_text()
        names = set(_SUBSTITUTION.findall(text))
        if missing := names - set(values):
            raise DenseSourcesError(f"{self.template} needs {sorted(missing)}, not given")
        rendered = _SUBSTITUTION.sub(lambda m: str(values[m[1]]), text)
        if _OTHER_JINJA.search(rendered):
            raise DenseSourcesError(
                f"{self.template} uses Jinja beyond plain substitutions: not rendered here"
            )
        return rendered


def read_recipe(sources: FlashInferSources, function_name: str) -> UnitRecipe:
    """The template and extra flags of ``function_name`` in FlashInfer's GEMM generator."""
    path = sources.root.parent / GENERATOR
    if not path.is_file():
        raise DenseSourcesError(f"FlashInfer's GEMM generator {path} is missing")
    tree = ast.parse(path.read_text(), filename=str(path))
    function = next(
        (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == function_name), None
    )
    if function is None:
        raise DenseSourcesError(f"{path}: no function {function_name}")
    templates = [
        n.value
        for n in ast.walk(function)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(".jinja")
    ]
    if len(set(templates)) != 1:
        raise DenseSourcesError(
            f"{path}:{function.lineno} {function_name} renders {templates}, not one template"
        )
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
    return UnitRecipe(function_name, sources.csrc / templates[0], tuple(flags))


def _literal_flags(node: ast.expr) -> list[str]:
    """The string literals of ``nvcc_flags + [...]`` (the architecture's part is not literal)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_flags(node.left) + _literal_flags(node.right)
    if isinstance(node, ast.List):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []
