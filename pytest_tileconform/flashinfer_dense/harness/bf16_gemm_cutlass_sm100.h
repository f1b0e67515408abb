// The harness of bf16_gemm_cutlass on SM100 (bf16 x bf16 to bf16, fp16 or fp32): included after the
// unit FlashInfer's JIT renders from bf16_gemm_cutlass.jinja (one output type and CTA shape, a
// launcher per cluster shape), with TILECONFORM_T, TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_NAME
// (the tactic's tile enum) defined by the unit. The template includes only the launchers; the
// runner's dispatch is in bf16_gemm_cutlass_template.h, which the module's binding includes after
// the runner class (bf16_gemm_cutlass.h), as here. Its launch calls dispatchGemmClusterShapeSm100
// as the runner's dispatchToArch does after picking the CTA shape: with A and B, M and N swapped
// (D = A B^T computed as (B A^T)^T). sm100_arguments.h's main drives it: a workspace query (null
// pointers), then the call that runs get_workspace_size, can_implement, initialize and run.
// Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K CLUSTER_M CLUSTER_N CLUSTER_K]
#include "flashinfer/gemm/bf16_gemm_cutlass.h"
#include "flashinfer/gemm/bf16_gemm_cutlass_template.h"
#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;

// bf16 A (M x K) and B (N x K), D
inline auto operand_bytes(int m, int n, int k) {
  return std::array<size_t, 3>{static_cast<size_t>(m) * k * 2, static_cast<size_t>(n) * k * 2,
                               static_cast<size_t>(m) * n * sizeof(TILECONFORM_T)};
}

template <typename Operands>
size_t launch(Operands const& operand, int m, int n, int k, CutlassGemmConfig config, char* space,
              size_t bytes) {
  auto [a, b, d] = operand;
  using Bf16 = __nv_bfloat16 const*;
  return dispatchGemmClusterShapeSm100<TILECONFORM_T, cutlass::arch::Sm100, TILECONFORM_CTA_M,
                                       TILECONFORM_CTA_N, TILECONFORM_CTA_K>(
      static_cast<Bf16>(b), static_cast<Bf16>(a), static_cast<TILECONFORM_T*>(d), n, m, k, 1, config,
      space, bytes, nullptr);
}

}  // namespace tileconform_dense

#include "sm100_arguments.h"
