"""Faults the host can tell a kernel would take when it runs, each a named rule.

A virtual device runs no kernel, so a case it accepts through ``launch`` is judged no further,
unless the host alone can decide that the kernel would fault: what the kernel will touch and
how is fixed by the instantiation and the problem, and a rule of the hardware (not of the
library) says that access faults. Each rule here is such a hardware rule; which accesses a
kernel makes is its backend's knowledge, handed over as :class:`VectorAccess` records.

Each rule is confirmed by a case of ``matrices/sm90-failures.yaml`` recorded on an H200.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The rule :func:`misaligned_vector` applies: the PTX ISA requires the address of a vector
#: load, store or reduction (``ld/st/red.global.v*``, ``red.global.add.noftz.bf16x2``, ...) to
#: be aligned to its access size and leaves a misaligned one undefined; the GPU stops the
#: kernel with cudaErrorMisalignedAddress, a sticky error (what the hardware cases of
#: ``matrices/sm90-failures.yaml`` check).
MISALIGNED_VECTOR = "misaligned-vector-access"
MISALIGNED_STATUS = "cudaErrorMisalignedAddress"


@dataclass(frozen=True)
class RunFault:
    """The kernel would fault when it runs: the rule that says so, the CUDA error it raises and
    what of this case breaks the rule."""

    rule: str
    status: str
    detail: str


@dataclass(frozen=True)
class VectorAccess:
    """Global-memory accesses a kernel makes ``vector_bytes`` at a time.

    ``offsets`` are byte offsets from the start of an allocation (cudaMalloc aligns every
    allocation to at least 256 bytes, so an offset's alignment is the address's). ``what``
    names the operand for the message.
    """

    what: str
    vector_bytes: int
    offsets: Iterable[int]


def misaligned_vector(accesses: Iterable[VectorAccess]) -> RunFault | None:
    """The first access that breaks :data:`MISALIGNED_VECTOR`, as a fault; None if none does."""
    for access in accesses:
        if access.vector_bytes <= 1:
            continue
        for offset in access.offsets:
            if offset % access.vector_bytes:
                return RunFault(
                    MISALIGNED_VECTOR,
                    MISALIGNED_STATUS,
                    f"{access.what}: a {access.vector_bytes}-byte vector access at byte offset "
                    f"{offset:,}, not a multiple of {access.vector_bytes}",
                )
    return None
