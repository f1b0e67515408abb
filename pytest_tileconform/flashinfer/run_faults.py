"""The failures a launcher instantiation's kernel would have on a problem, decided on the host.

The virtual device judges through ``launch``; which operands a kernel then moves with TMA, and
how its epilogue writes D, is fixed by the instantiation, and where each group's operands start
and their row pitches by the problem, so where they break a hardware rule
(:mod:`..virtual.faults`) the verdict is a ``run`` fault or a predicted ``numerics`` failure
without running anything. This module knows what the launcher's kernels move and how; the rules
are the virtual device's.

One kernel family is modelled: SM90's ptr-array grouped GEMM (cutlass/gemm/kernel/
sm90_gemm_array_tma_warpspecialized_cooperative.hpp, FlashInfer 0.7.4). For each group it
writes the group's address, shapes and byte strides into its TMA descriptors on the device
(tensormaps_perform_update -> tensormaps_replace_global_address and
tensormaps_replace_global_tensor_properties -> cute::tma_descriptor_replace_addr_in_shared_mem,
cute::tma_descriptor_replace_dims_strides_in_shared_mem): the mainloop's A and B always
(gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:671-712, the FP8 mainloop
likewise), the epilogue's D where the epilogue stores through TMA
(epilogue/collective/sm90_epilogue_array_tma_warpspecialized.hpp:1118-1163). Groups are laid
out as TensorRT-LLM lays them (computeStridesTmaWarpSpecializedKernel, the harness's
make_gemm_input): A and an unfused D of expert e start sum(rows[:e]) rows into their buffers, B
e x N rows in; only experts with rows get pointers. On the H200 a group start off 16 bytes
faults (cudaErrorMisalignedAddress) and a pitch off 16 bytes with every start on them runs to a
wrong D (matrices/sm90-failures.yaml, suites run-tma-address and align-pitch).

The finalize fusion stores D through TensorRT-LLM's scatter visitor (cutlass_extensions/
epilogue/fusion/sm90_visitor_scatter.hpp: get_reduction_op and the r2g copies of reduce()) with
plain global stores or reductions of up to AlignmentOutput elements, 16 bytes, predicated on
each vector's first coordinate (``elem_less(c, residue)``), one row per token: no TMA rule
applies to its D, and a pitch off 16 bytes gives a wrong D from the second row on (on the H200:
one token right, two tokens wrong in the second row, suite align-finalize). The launcher passes
no C. A is the activations (rows of K), B the weights (rows of K), D the output (rows of N);
swap_ab swaps the GEMM's operands, not these tensors or their layout. Neither the launcher nor
CUTLASS checks any of it: TensorRT-LLM passes no host problem shapes, so can_implement checks no
alignment.
"""

from __future__ import annotations

from itertools import accumulate

from ..dtypes import DTYPES
from ..virtual.faults import (
    RunFault,
    TmaOperand,
    VectorRows,
    tma_address_fault,
    tma_stride_fault,
    vector_row_fault,
)
from .configs import KernelConfig, d_dtype
from .problem import Problem

#: The architectures whose kernels :func:`tma_operands` describes.
MODELLED_ARCHS = (90,)


def tma_operands(config: KernelConfig, problem: Problem) -> list[TmaOperand]:
    """The operands ``config``'s kernel moves with TMA on ``problem``, each with its row pitch,
    where each expert with rows starts in its buffer, and the most rows one has."""
    rows = problem.rows_per_expert
    n, k = problem.n, problem.k
    first_row = [start for start, count in zip(accumulate((0, *rows[:-1])), rows, strict=True) if count]
    experts = [e for e, count in enumerate(rows) if count]
    most = max(rows, default=0)
    act, weight = DTYPES[config.act].bits, DTYPES[config.weight].bits
    operands = [
        TmaOperand(
            f"A ({config.act} activations, rows of K={k})",
            k * act,
            tuple(r * k * act for r in first_row),
            most,
        ),
        TmaOperand(
            f"B ({config.weight} weights, rows of K={k})",
            k * weight,
            tuple(e * n * k * weight for e in experts),
            n,
        ),
    ]
    if config.fusion != "finalize":
        d = d_dtype(config.act, config.out, config.fusion)
        out = DTYPES[d].bits
        operands.append(
            TmaOperand(f"D ({d} output, rows of N={n})", n * out, tuple(r * n * out for r in first_row), most)
        )
    return operands


def finalize_output(config: KernelConfig, problem: Problem) -> VectorRows:
    """The finalize D ``config``'s scatter writes on ``problem``: one row of N per token."""
    from .numerics.reference import SIMULATED_TOP_K, finalize_out_rows

    top_k = problem.top_k if problem.top_k is not None else SIMULATED_TOP_K
    rows = finalize_out_rows(problem.rows_per_expert, top_k, problem.tokens)
    d = d_dtype(config.act, config.out, config.fusion)
    return VectorRows(f"finalize D ({d} output, rows of N={problem.n})", problem.n * DTYPES[d].bits, rows)


def predicted_fault(config: KernelConfig, problem: Problem) -> RunFault | None:
    """What ``config``'s kernel would do wrong on ``problem``: a TMA fault (it stops the kernel),
    else a TMA stride's wrong D, else the finalize scatter's wrong D, else None (also for an
    architecture this module does not model)."""
    if config.arch not in MODELLED_ARCHS:
        return None
    operands = tma_operands(config, problem)
    fault = tma_address_fault(operands) or tma_stride_fault(operands)
    if fault is None and config.fusion == "finalize":
        fault = vector_row_fault(finalize_output(config, problem))
    return fault
