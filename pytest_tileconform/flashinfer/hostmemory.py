"""Whether this host has the memory to judge a case on the virtual device.

The virtual device is host memory: the case's inputs are made on the CPU and written to files,
the harness reads them into host buffers and copies them into the device memory its runtime
emulates with host allocations, fills D and the workspace with the poison pattern, and
FlashInfer's host code sets the launch up on them. A problem inside the matrix bounds (2^31
elements made on the CPU) can need more than the machine has, and the out-of-memory killer then
ends the harness with no verdict, or ends something else of the host. So a case whose estimate
is above the memory available is not judged here, with a reason naming the problem, the
estimate and the bound, before anything of it is made.
"""

from __future__ import annotations

from ..compile.cache import available_memory
from ..dtypes import dtype
from .axes import MoeCase

#: Peak host memory of a virtual case, measured (BENCHMARKS.md, "Host memory of a virtual
#: case"): making the inputs on the CPU peaks at about 8.2 bytes per element of A and B whatever
#: their storage (they are drawn through fp32 and 64-bit integer temporaries: bf16 and fp8 A
#: alike), and the harness (its reads of the files and the emulated device memory they are
#: copied into, D and the workspace poisoned) at 1.7 to 1.9 times A, B and D at their storage
#: sizes; the inputs stay cached while the harness runs.
INPUT_BYTES_PER_ELEMENT = 9
HARNESS_FACTOR = 2
GB = 1e9


def operand_bytes(case: MoeCase) -> tuple[int, int, int]:
    """A (rows x k), B (experts x n x k) and D (rows x n) of ``case``'s problem in bytes, at the
    storage size of their types (block scales and bias are a small fraction beside them)."""
    a, b, d = operand_elements(case)
    return a * dtype(case.act).bits // 8, b * dtype(case.weight).bits // 8, d * dtype(case.out).bits // 8


def operand_elements(case: MoeCase) -> tuple[int, int, int]:
    """Elements of A, B and D of ``case``'s problem."""
    problem = case.axes.problem
    rows = sum(problem.rows)
    return rows * problem.k, len(problem.rows) * problem.n * problem.k, rows * problem.n


def virtual_need(case: MoeCase) -> int:
    """Bytes of host memory judging ``case`` on the virtual device takes at its peak."""
    a, b, _ = operand_elements(case)
    return INPUT_BYTES_PER_ELEMENT * (a + b) + HARNESS_FACTOR * sum(operand_bytes(case))


def virtual_refusal(case: MoeCase, available: int | None = None) -> str | None:
    """Why ``case`` is not judged on the virtual device of this host (its estimate is above
    ``available`` bytes, by default the host's available memory now), or None if it fits."""
    need = virtual_need(case)
    have = available_memory() if available is None else available
    if need <= have:
        return None
    problem = case.axes.problem
    shape = f"{sum(problem.rows):,} rows over {len(problem.rows)} experts, n {problem.n:,}, k {problem.k:,}"
    name = f"'{problem.name}' " if problem.name else ""
    return (
        f"the problem {name}({shape}) needs about {need / GB:.1f} GB of host memory on the virtual "
        f"device (its {sum(operand_bytes(case)) / GB:.1f} GB of operands: the inputs made on the CPU, "
        f"the harness's copies and the device memory it emulates), more than the {have / GB:.1f} GB "
        "this host has available: judge it on a host with more memory free, on its GPU, or with a "
        "smaller problem"
    )
