"""Failures the host can tell a kernel would have when it runs, each a named rule.

A virtual device runs no kernel, so a case it accepts through ``launch`` is judged no further,
unless the host alone can decide what the kernel would do: which operands a kernel moves and
how is fixed by the instantiation and the problem, and a rule says what that movement does on
the hardware. Two outcomes are predicted: a fault (``run``: :data:`TMA_ADDRESS`) and a kernel
that runs to the end and writes a wrong D (``numerics``: :data:`TMA_STRIDE`, :data:`VECTOR_ROW`),
each only as the H200 showed it; which operands a kernel moves and how is its backend's
knowledge, handed over as :class:`TmaOperand` and :class:`VectorRows` records.

Each rule is confirmed by cases of ``matrices/sm90-failures.yaml`` recorded on an H200 that
separate an operand's row pitch from its groups' base addresses: a pitch off 16 bytes with
every base on them runs to a wrong D; a base off 16 bytes (whose pitch is then off them too)
faults.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..verdict import Stage

#: TMA's alignment: of a descriptor's global address and of its global strides, in bytes
#: (cuTensorMapEncodeTiled's contract, which the device-side ``tensormap.replace`` does not check)
TMA_BYTES = 16
#: The rule :func:`tma_address_fault` applies: a group's operand whose first element is not on
#: :data:`TMA_BYTES`, written into the descriptor on the device (PTX ``tensormap.replace.tile
#: .global_address``, cute/arch/copy_sm90_desc.hpp) and then loaded or stored through, stops
#: the kernel with cudaErrorMisalignedAddress, a sticky error.
TMA_ADDRESS = "tma-global-address-alignment"
MISALIGNED_STATUS = "cudaErrorMisalignedAddress"
#: The rule :func:`tma_stride_fault` applies: the descriptor keeps a global stride without its
#: 4 least significant bits (copy_sm90_desc.hpp: "4 LSBs are not included"; before CUDA 12.5
#: CuTe shifts them out itself), so a row pitch that is not a multiple of :data:`TMA_BYTES`
#: moves every row after a group's first from the pitch rounded down: no fault, a wrong D.
TMA_STRIDE = "tma-global-stride-alignment"
#: The rule :func:`vector_row_fault` applies: an epilogue that writes each output row with
#: 16-byte vector stores or reductions (one vector per 16 bytes from the row's first element,
#: predicated on the vector's first element only) writes a vector that runs past the end of a
#: row whose pitch is not a multiple of 16 bytes into the next row, and the rows after the
#: first start off the vectors' alignment: no fault, a wrong D; a D of one row is right.
VECTOR_ROW = "epilogue-vector-row-alignment"
VECTOR_BYTES = 16
#: the status a hardware ``numerics`` failure records (flashinfer/hardware.py)
MISMATCH_STATUS = "mismatch"
#: how a predicted wrong D's detail begins: nothing ran, the rule speaks
PREDICTED = "predicted, not run"


@dataclass(frozen=True)
class RunFault:
    """What the kernel would do when it runs: the rule that says so, the stage it fails at
    (``run``: a fault with its CUDA error; ``numerics``: a wrong D, never seen, only predicted),
    the status and what of this case breaks the rule."""

    rule: str
    status: str
    detail: str
    stage: Stage = Stage.RUN


@dataclass(frozen=True)
class TmaOperand:
    """An operand a kernel moves through a TMA descriptor, per group: ``pitch_bits`` its row
    pitch (the global stride of its second dimension), ``base_bits`` where each group that is
    moved starts, from its buffer's start (on 256 bytes), and ``rows`` the most rows a group
    has; ``what`` names it for the message."""

    what: str
    pitch_bits: int
    base_bits: tuple[int, ...] = (0,)
    rows: int = 2


def tma_address_fault(operands: Iterable[TmaOperand]) -> RunFault | None:
    """The first group base that breaks :data:`TMA_ADDRESS`, as a ``run`` fault; None if none does."""
    for operand in operands:
        for base in operand.base_bits:
            if base % (8 * TMA_BYTES):
                return RunFault(
                    TMA_ADDRESS,
                    MISALIGNED_STATUS,
                    f"{operand.what}: a group starting {base / 8:,g} bytes into its buffer, "
                    f"not on {TMA_BYTES} bytes (its row pitch {operand.pitch_bits / 8:,g} bytes)",
                )
    return None


def tma_stride_fault(operands: Iterable[TmaOperand]) -> RunFault | None:
    """The first operand of several rows that breaks :data:`TMA_STRIDE`, as a predicted
    ``numerics`` failure; None if none does."""
    for operand in operands:
        if operand.rows >= 2 and operand.pitch_bits % (8 * TMA_BYTES):
            return RunFault(
                TMA_STRIDE,
                MISMATCH_STATUS,
                f"{PREDICTED}: {operand.what}: a TMA global stride of {operand.pitch_bits / 8:,g} bytes, "
                f"not a multiple of {TMA_BYTES}: the descriptor keeps "
                f"{operand.pitch_bits // (8 * TMA_BYTES) * TMA_BYTES:,} of them",
                Stage.NUMERICS,
            )
    return None


@dataclass(frozen=True)
class VectorRows:
    """An output a kernel writes row by row with :data:`VECTOR_BYTES`-byte vectors: ``rows``
    rows of ``pitch_bits`` bits, packed; ``what`` names it for the message."""

    what: str
    pitch_bits: int
    rows: int


def vector_row_fault(output: VectorRows) -> RunFault | None:
    """:data:`VECTOR_ROW` as a predicted ``numerics`` failure when ``output`` has more than one
    row and a pitch that is not a multiple of :data:`VECTOR_BYTES`; None otherwise (one row:
    the vector past its end lands past D, which the H200 left right)."""
    if output.rows < 2 or output.pitch_bits % (8 * VECTOR_BYTES) == 0:
        return None
    return RunFault(
        VECTOR_ROW,
        MISMATCH_STATUS,
        f"{PREDICTED}: {output.what}: {output.rows:,} rows of {output.pitch_bits / 8:,g} bytes, "
        f"not a multiple of {VECTOR_BYTES}: its {VECTOR_BYTES}-byte vectors cross rows",
        Stage.NUMERICS,
    )
