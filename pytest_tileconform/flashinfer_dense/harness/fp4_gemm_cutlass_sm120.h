// The harness of fp4_gemm_cutlass_sm120 (NVFP4 x NVFP4): included after the unit FlashInfer's JIT
// renders from fp4_gemm_cutlass_sm120.jinja (one output type and CTA shape, both swap_ab, each with
// its data-parallel and its stream-K launcher), with TILECONFORM_T, TILECONFORM_CTA_M/N/K and
// TILECONFORM_TILE_NAME (the tactic's tile enum) defined by the unit. It drives the launcher the
// runner's dispatch picks for one tactic (use_stream_k: genericFp4GemmKernelLauncherStreamK, else
// genericFp4GemmKernelLauncher) as getWorkspaceSize and gemm do: a workspace query (null pointers),
// then the call that runs get_workspace_size, can_implement, initialize and run (dense_verdict.h's
// drive). Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K]
#include <cstdlib>

#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;
using One = cute::Int<1>;

template <bool Swap, bool StreamK>
size_t launch(void* d, void const* a, void const* b, void const* sfa, void const* sfb,
              float const* alpha, int m, int n, int k, CutlassGemmConfig config, char* space,
              size_t bytes) {
  if constexpr (StreamK) {
    return genericFp4GemmKernelLauncherStreamK<TILECONFORM_T, CtaM, CtaN, CtaK, One, One, One, _1SM,
                                               Swap>(d, a, b, sfa, sfb, alpha, m, n, k, 1, config,
                                                     space, bytes, nullptr, nullptr);
  } else {
    return genericFp4GemmKernelLauncher<TILECONFORM_T, CtaM, CtaN, CtaK, One, One, One, _1SM, Swap>(
        d, a, b, sfa, sfb, alpha, m, n, k, 1, config, space, bytes, nullptr, nullptr);
  }
}

template <bool Swap, bool StreamK>
int judge(const char* run_dir, int m, int n, int k) {
  CutlassGemmConfig config(CutlassTileConfigSM120::TILECONFORM_TILE_NAME, MainloopScheduleType::AUTO,
                           EpilogueScheduleType::AUTO, ClusterShape::ClusterShape_1x1x1, Swap,
                           StreamK);
  auto bytes = block_scaled_bytes<TILECONFORM_T, BlockScaled::nvfp4>(m, n, k);
  return drive(run_dir, bytes, [&](std::array<void*, 6> const& operand, char* space, size_t size) {
    auto [a, b, d, sfa, sfb, alpha] = operand;
    return launch<Swap, StreamK>(d, a, b, sfa, sfb, static_cast<float const*>(alpha), m, n, k, config,
                                 space, size);
  });
}

}  // namespace tileconform_dense

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s RUN_DIR SWAP_AB M N K [STREAM_K]\n", argv[0]);
    return 2;
  }
  using namespace tileconform_dense;
  int m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  bool swap = std::atoi(argv[2]), stream_k = argc == 7 && std::atoi(argv[6]);
  if (stream_k) return swap ? judge<true, true>(argv[1], m, n, k) : judge<false, true>(argv[1], m, n, k);
  return swap ? judge<true, false>(argv[1], m, n, k) : judge<false, false>(argv[1], m, n, k);
}
