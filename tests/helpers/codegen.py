"""Reading FlashInfer's own generated code and build flags, to compare our code generation with
its generator: the instantiation macro's pattern, its CUDA type names, flag lists evaluated from
FlashInfer's build code; and a kernel configuration to vary."""

from __future__ import annotations

import ast
import re

from pytest_tileconform.flashinfer.configs import KernelConfig

CUDA_TYPES = {"__nv_bfloat16": "bf16", "half": "fp16", "float": "fp32", "__nv_fp8_e4m3": "fp8_e4m3"}

INSTANTIATION_RE = re.compile(
    r"\n#if [^\n]*\n\s*INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM\((?P<args>[^;]*)\);\n#endif"
)


def base(**changes: object) -> KernelConfig:
    fields: dict[str, object] = dict(
        arch=90,
        act="bf16",
        weight="bf16",
        out="bf16",
        tile=(128, 128, 64),
        cluster=(1, 1, 1),
        swap_ab=False,
        fusion="none",
    )
    fields.update(changes)
    return KernelConfig(**fields)  # type: ignore[arg-type]


def list_value(node: ast.expr, names: dict[str, list[str]]) -> list[str]:
    """Evaluate a flag list expression of FlashInfer's build code (CUDA >= 12.8 assumed)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return list_value(node.left, names) + list_value(node.right, names)
    if isinstance(node, ast.Name):
        return names[node.id]
    assert isinstance(node, ast.List), ast.dump(node)
    values = []
    for element in node.elts:
        if isinstance(element, ast.IfExp):
            element = element.body
        value = ast.literal_eval(element)
        if value:
            values.append(value)
    return values
