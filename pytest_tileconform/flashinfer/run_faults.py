"""The faults a launcher instantiation's kernel would take on a problem, decided on the host.

The virtual device judges through ``launch``; what a kernel then touches is fixed by the
instantiation and the problem, so where that breaks a hardware rule (:mod:`..virtual.faults`)
the verdict is a ``run`` failure without running anything. This module knows which accesses
the launcher's kernels make; the rules are the virtual device's.

One case is modelled: the finalize epilogue on SM90. TensorRT-LLM's scatter visitor
(cutlass_extensions/epilogue/fusion/sm90_visitor_scatter.hpp, FlashInfer 0.7.4) writes each
permuted row of the GEMM into output row ``dest_row % T`` with vectors of
``MaxVecSize = min(AlignmentOutput, values of the epilogue subtile / 256 threads)`` elements
(lines 288-291) through ``red.global.add.noftz`` of fp16/bf16 x8, x4 or x2 (lines 218-250; a
plain st.global of the same width without reduction, lines 294 and 206-212); fp32 and other
outputs use a scalar atomic add (line 253). The cooperative schedule's epilogue subtile is
``min(128, tile M) x gcd(min(32, tile N), tile N)`` (cutlass/epilogue/collective/builders/
sm90_builder.inl:117-121), and AlignmentOutput is 128 bits of the output type. Output row t
starts ``t * n`` elements into D and a vector starts at a column that is a multiple of its width,
so a row whose start is not a multiple of the vector's bytes faults. Neither the launcher nor
CUTLASS checks ``n`` (TensorRT-LLM passes no host problem shapes, so can_implement checks no
alignment).
"""

from __future__ import annotations

from collections.abc import Iterable
from math import gcd

from ..dtypes import DTYPES
from ..virtual.faults import RunFault, VectorAccess, misaligned_vector
from .codegen import KernelConfig

#: Threads of the SM90 cooperative kernel's two consumer warp groups, which run the epilogue.
EPILOGUE_THREADS = 256
#: Output types whose reduction the scatter visitor vectorises (the red.global.add.noftz
#: f16x2 / bf16x2 forms); any other output is written one element at a time.
VECTORISED_OUTPUTS = ("fp16", "bf16")


def scatter_vector_elements(config: KernelConfig) -> int:
    """Elements per vector of the SM90 finalize scatter for ``config`` (1: not vectorised)."""
    if config.out not in VECTORISED_OUTPUTS:
        return 1
    tile_m, tile_n, _ = config.tile
    subtile = min(128, tile_m) * gcd(min(32, tile_n), tile_n)
    alignment = 128 // DTYPES[config.out].bits
    most = min(alignment, subtile // EPILOGUE_THREADS)
    return next((width for width in (8, 4, 2) if most % width == 0), 1)


def predicted_fault(config: KernelConfig, n: int, dest_rows: Iterable[int] | None) -> RunFault | None:
    """The fault ``config``'s kernel would take on a problem of ``n`` columns whose permuted
    rows go to output rows ``dest_rows`` (finalize only; None without fusion), or None."""
    if config.arch != 90 or config.fusion != "finalize" or dest_rows is None:
        return None
    width = scatter_vector_elements(config)
    element_bytes = DTYPES[config.out].bits // 8
    row_bytes = n * element_bytes
    starts = sorted({int(row) * row_bytes for row in dest_rows})
    return misaligned_vector(
        [VectorAccess(f"finalize scatter into D rows of {row_bytes} bytes", width * element_bytes, starts)]
    )
