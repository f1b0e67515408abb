"""Faults the host can tell a kernel would take when it runs, each a named rule.

A virtual device runs no kernel, so a case it accepts through ``launch`` is judged no further,
unless the host alone can decide that the kernel would fault: which operands a kernel moves and
how is fixed by the instantiation and the problem, and a rule of the hardware (not of the
library) says that movement faults. Each rule here is such a hardware rule; which operands a
kernel moves with TMA is its backend's knowledge, handed over as :class:`TmaOperand` records.
No rule here judges what a kernel computes: a kernel that runs and writes wrong values is the
hardware's verdict alone (``numerics``), never predicted.

Each rule is confirmed by cases of ``matrices/sm90-failures.yaml`` recorded on an H200.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The rule :func:`tma_stride_fault` applies: a TMA descriptor's global strides must be
#: multiples of 16 bytes (cuTensorMapEncodeTiled's contract; PTX ``tensormap.replace``
#: ``.global_stride`` writes them on the device unchecked, cute/arch/copy_sm90_desc.hpp
#: "Strides must be a multiple of 16"). A kernel that writes a group's row pitch into its
#: descriptor on the device and then loads or stores through it stops with
#: cudaErrorMisalignedAddress, a sticky error.
TMA_STRIDE = "tma-global-stride-alignment"
TMA_STRIDE_BYTES = 16
MISALIGNED_STATUS = "cudaErrorMisalignedAddress"


@dataclass(frozen=True)
class RunFault:
    """The kernel would fault when it runs: the rule that says so, the CUDA error it raises and
    what of this case breaks the rule."""

    rule: str
    status: str
    detail: str


@dataclass(frozen=True)
class TmaOperand:
    """An operand a kernel moves through a TMA descriptor whose row pitch (the global stride
    of its second dimension) is ``pitch_bits`` bits; ``what`` names it for the message."""

    what: str
    pitch_bits: int


def tma_stride_fault(operands: Iterable[TmaOperand]) -> RunFault | None:
    """The first operand that breaks :data:`TMA_STRIDE`, as a fault; None if none does."""
    for operand in operands:
        if operand.pitch_bits % (8 * TMA_STRIDE_BYTES):
            return RunFault(
                TMA_STRIDE,
                MISALIGNED_STATUS,
                f"{operand.what}: a TMA global stride of {operand.pitch_bits / 8:,g} bytes, "
                f"not a multiple of {TMA_STRIDE_BYTES}",
            )
    return None
