// The harness of fp4_gemm_cutlass on SM100 (NVFP4 x NVFP4): included after the unit FlashInfer's JIT
// renders from fp4_gemm_cutlass.jinja (one output type and CTA shape, a launcher per cluster shape),
// with TILECONFORM_T, TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_NAME (the tactic's tile enum) defined
// by the unit. It calls dispatchNVFP4xNVFP4GemmClusterShapeSm100, the runner's own switch from the
// tactic's cluster shape to its launcher (1SM or 2SM MMA), as dispatchToArch does after picking the
// CTA shape: a workspace query (null pointers), then the call that runs get_workspace_size,
// can_implement, initialize and run (dense_verdict.h's drive). SM100's runner has no swap_ab or stream-K tactic.
// Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K CLUSTER_M CLUSTER_N CLUSTER_K]
#include <cstdlib>

#include "sm100_arguments.h"
#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;
using CtaM = cute::Int<TILECONFORM_CTA_M>;
using CtaN = cute::Int<TILECONFORM_CTA_N>;
using CtaK = cute::Int<TILECONFORM_CTA_K>;

inline size_t launch(void* d, void const* a, void const* b, void const* sfa, void const* sfb,
                     float const* alpha, int m, int n, int k, CutlassGemmConfig config,
                     char* space, size_t bytes) {
  return dispatchNVFP4xNVFP4GemmClusterShapeSm100<TILECONFORM_T, CtaM, CtaN, CtaK>(
      static_cast<TILECONFORM_T*>(d), a, b, sfa, sfb, alpha, m, n, k, 1, config, space, bytes,
      nullptr);
}

inline int judge(const char* run_dir, int m, int n, int k, ClusterShape cluster) {
  CutlassGemmConfig config(CutlassTileConfigSM100::TILECONFORM_TILE_NAME, MainloopScheduleType::AUTO,
                           EpilogueScheduleType::AUTO, cluster);
  // the operands' bytes: e2m1 A and B (two per byte), D, one ue4m3 scale per 16 along K in 128 x 4
  // swizzled blocks, the fp32 global scale (alpha)
  size_t sf_k = round_up(static_cast<size_t>(k) / 16, 4);
  std::array<size_t, 6> bytes = {static_cast<size_t>(m) * k / 2, static_cast<size_t>(n) * k / 2,
                                 static_cast<size_t>(m) * n * sizeof(TILECONFORM_T),
                                 round_up(m, 128) * sf_k, round_up(n, 128) * sf_k, sizeof(float)};
  return drive(run_dir, bytes, [&](std::array<void*, 6> const& operand, char* space, size_t size) {
    auto [a, b, d, sfa, sfb, alpha] = operand;
    return launch(d, a, b, sfa, sfb, static_cast<float const*>(alpha), m, n, k, config, space, size);
  });
}

}  // namespace tileconform_dense

int main(int argc, char** argv) {
  using namespace tileconform_dense;
  ClusterShape cluster;
  if (!sm100_arguments(argc, argv, cluster)) return 2;
  return judge(argv[1], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), cluster);
}
