// The harness of fp4_gemm_cutlass on SM100 (NVFP4 x NVFP4): included after the unit FlashInfer's JIT
// renders from fp4_gemm_cutlass.jinja (one output type and CTA shape, a launcher per cluster shape),
// with TILECONFORM_T, TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_fp4_gemm_cutlass (the tactic's tile enum) defined
// by the unit. Its launch calls dispatchNVFP4xNVFP4GemmClusterShapeSm100, the runner's own switch from the
// tactic's cluster shape to its launcher (1SM or 2SM MMA), as dispatchToArch does after picking the
// CTA shape; sm100_arguments.h's main drives it: a workspace query (null pointers), then the call
// that runs get_workspace_size, can_implement, initialize and run.
// Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K CLUSTER_M CLUSTER_N CLUSTER_K]
#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;

inline auto operand_bytes(int m, int n, int k) {
  return block_scaled_bytes<TILECONFORM_T, BlockScaled::nvfp4>(m, n, k);
}

template <typename Operands>
size_t launch(Operands const& operand, int m, int n, int k, CutlassGemmConfig config, char* space,
              size_t bytes) {
  auto [a, b, d, sfa, sfb, alpha] = operand;
  return dispatchNVFP4xNVFP4GemmClusterShapeSm100<TILECONFORM_T, CtaM, CtaN, CtaK>(
      static_cast<TILECONFORM_T*>(d), a, b, sfa, sfb, static_cast<float const*>(alpha), m, n, k, 1,
      config, space, bytes, nullptr);
}

}  // namespace tileconform_dense

#include "sm100_arguments.h"
