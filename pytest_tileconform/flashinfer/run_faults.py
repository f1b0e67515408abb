"""The faults a launcher instantiation's kernel would take on a problem, decided on the host.

The virtual device judges through ``launch``; which operands a kernel then moves with TMA is
fixed by the instantiation, and their row pitches by the problem, so where a pitch breaks a
hardware rule (:mod:`..virtual.faults`) the verdict is a ``run`` failure without running
anything. This module knows which operands the launcher's kernels move with TMA; the rule is
the virtual device's.

One kernel family is modelled: SM90's ptr-array grouped GEMM (cutlass/gemm/kernel/
sm90_gemm_array_tma_warpspecialized_cooperative.hpp, FlashInfer 0.7.4). For each group it
writes the group's shapes and byte strides into its TMA descriptors on the device
(tensormaps_perform_update -> tensormaps_replace_global_tensor_properties ->
cute::tma_descriptor_replace_dims_strides_in_shared_mem): the mainloop's A and B always
(gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp:671-712, the FP8 mainloop
likewise), the epilogue's D where the epilogue stores through TMA
(epilogue/collective/sm90_epilogue_array_tma_warpspecialized.hpp:1118-1163). The finalize
fusion stores D through TensorRT-LLM's scatter visitor with plain global reductions, not TMA,
so its D pitch breaks no TMA rule (the H200 agrees: finalize with a 202-byte D pitch runs). The
launcher passes no C. A is the activations (rows of K), B the weights (rows of K), D the output
(rows of N); swap_ab swaps the GEMM's operands, not these tensors or their pitches. Neither the
launcher nor CUTLASS checks the pitches: TensorRT-LLM passes no host problem shapes, so
can_implement checks no alignment.
"""

from __future__ import annotations

from ..dtypes import DTYPES
from ..virtual.faults import RunFault, TmaOperand, tma_stride_fault
from .configs import KernelConfig, d_dtype

#: The architectures whose kernels :func:`tma_operands` describes.
MODELLED_ARCHS = (90,)


def tma_operands(config: KernelConfig, n: int, k: int) -> list[TmaOperand]:
    """The operands ``config``'s kernel moves with TMA on a problem of ``n`` x ``k``, each
    with its row pitch."""
    operands = [
        TmaOperand(f"A ({config.act} activations, rows of K={k})", k * DTYPES[config.act].bits),
        TmaOperand(f"B ({config.weight} weights, rows of K={k})", k * DTYPES[config.weight].bits),
    ]
    if config.fusion != "finalize":
        d = d_dtype(config.act, config.out, config.fusion)
        operands.append(TmaOperand(f"D ({d} output, rows of N={n})", n * DTYPES[d].bits))
    return operands


def predicted_fault(config: KernelConfig, n: int, k: int) -> RunFault | None:
    """The fault ``config``'s kernel would take on a problem of ``n`` x ``k``, or None (also
    for an architecture this module does not model)."""
    if config.arch not in MODELLED_ARCHS:
        return None
    return tma_stride_fault(tma_operands(config, n, k))
