// The harness of mxfp8_gemm_cutlass_sm120: included after the unit FlashInfer's JIT renders from
// mxfp8_gemm_cutlass_sm120.jinja (both swap_ab instantiations of one output type and CTA shape),
// with TILECONFORM_T, TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_NAME (the tactic's tile enum) defined
// by the unit. It drives the launcher for one tactic through dense_verdict.h's drive (the runner's
// getWorkspaceSize, then its gemm). Usage: harness RUN_DIR SWAP_AB M N K
#include <cstdlib>

#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;

template <bool Swap>
int judge(const char* run_dir, int m, int n, int k) {
  CutlassGemmConfig config(CutlassTileConfigSM120::TILECONFORM_TILE_NAME, MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                           ClusterShape::ClusterShape_1x1x1, Swap);
  auto bytes = block_scaled_bytes<TILECONFORM_T, BlockScaled::mxfp8>(m, n, k);
  return drive(run_dir, bytes, [&](std::array<void*, 5> const& operand, char* space, size_t size) {
    auto [a, b, d, sfa, sfb] = operand;
    return genericMxfp8GemmKernelLauncherSm120<TILECONFORM_T, CtaM, CtaN, CtaK, Swap>(
        d, a, b, sfa, sfb, m, n, k, 1, config, space, size, nullptr, nullptr);
  });
}

}  // namespace tileconform_dense

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RUN_DIR SWAP_AB M N K\n", argv[0]);
    return 2;
  }
  int m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  return std::atoi(argv[2]) ? tileconform_dense::judge<true>(argv[1], m, n, k)
                            : tileconform_dense::judge<false>(argv[1], m, n, k);
}
