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
from ..matrix.cases import Case

#: Copies of the operands (A, B, D at their storage sizes) a virtual case holds at its peak:
#: the inputs made on the CPU, the files' bytes read back into the harness's buffers, and the
#: emulated device memory, plus the reads' and fills' own temporaries.
VIRTUAL_COPIES = 4
GB = 1e9


def operand_bytes(case: Case) -> int:
    """A (rows x k), B (experts x n x k) and D (rows x n) of ``case``'s problem, at the storage
    size of their types (block scales and bias are a small fraction beside them)."""
    problem = case.problem
    rows = sum(problem.rows)
    bits = (
        rows * problem.k * dtype(case.act).bits
        + len(problem.rows) * problem.n * problem.k * dtype(case.weight).bits
        + rows * problem.n * dtype(case.out).bits
    )
    return bits // 8


def virtual_refusal(case: Case, available: int | None = None) -> str | None:
    """Why ``case`` is not judged on the virtual device of this host (its estimate is above
    ``available`` bytes, by default the host's available memory now), or None if it fits."""
    need = VIRTUAL_COPIES * operand_bytes(case)
    have = available_memory() if available is None else available
    if need <= have:
        return None
    problem = case.problem
    shape = f"{sum(problem.rows):,} rows over {len(problem.rows)} experts, n {problem.n:,}, k {problem.k:,}"
    name = f"'{problem.name}' " if problem.name else ""
    return (
        f"the problem {name}({shape}) needs about {need / GB:.1f} GB of host memory on the virtual "
        f"device ({VIRTUAL_COPIES} copies of its {operand_bytes(case) / GB:.1f} GB of operands: the "
        f"inputs, the harness's reads and the emulated device memory), more than the "
        f"{have / GB:.1f} GB this host has available: judge it on a host with more memory free, "
        "on its GPU, or with a smaller problem"
    )
