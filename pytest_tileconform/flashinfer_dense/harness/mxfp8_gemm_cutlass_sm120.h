// The harness of mxfp8_gemm_cutlass_sm120: included after the unit FlashInfer's JIT renders from
// mxfp8_gemm_cutlass_sm120.jinja (both swap_ab instantiations of one output type and CTA shape),
// with TILECONFORM_T, TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_NAME (the tactic's tile enum) defined
// by the unit. It drives the launcher as the runner's getWorkspaceSize and gemm do for one tactic:
// a workspace query (null pointers), then the call that runs get_workspace_size, can_implement,
// initialize and run. Usage: harness RUN_DIR SWAP_AB M N K
#include <cstdlib>
#include <exception>

#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;
using Cta = cute::Int<TILECONFORM_CTA_M>;
using CtaN = cute::Int<TILECONFORM_CTA_N>;
using CtaK = cute::Int<TILECONFORM_CTA_K>;

inline size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

template <bool Swap>
int judge(const char* run_dir, int m, int n, int k) {
  CutlassGemmConfig config(CutlassTileConfigSM120::TILECONFORM_TILE_NAME, MainloopScheduleType::AUTO, EpilogueScheduleType::AUTO,
                           ClusterShape::ClusterShape_1x1x1, Swap);
  size_t workspace = 0;
  try {
    workspace = genericMxfp8GemmKernelLauncherSm120<TILECONFORM_T, Cta, CtaN, CtaK, Swap>(
        nullptr, nullptr, nullptr, nullptr, nullptr, m, n, k, 1, config, nullptr, 0, nullptr, nullptr);
  } catch (std::exception const& e) {
    return write_verdict(run_dir, "threw", e.what(), 0);
  }
  // the operands' bytes: fp8 A and B, one ue8m0 scale per 32 along K in 128 x 4 swizzled blocks
  void *a, *b, *d, *sfa, *sfb;
  char* space = nullptr;
  size_t sf_k = round_up(static_cast<size_t>(k) / 32, 4);
  if (cudaMalloc(&a, static_cast<size_t>(m) * k) != cudaSuccess ||
      cudaMalloc(&b, static_cast<size_t>(n) * k) != cudaSuccess ||
      cudaMalloc(&d, static_cast<size_t>(m) * n * sizeof(TILECONFORM_T)) != cudaSuccess ||
      cudaMalloc(&sfa, round_up(m, 128) * sf_k) != cudaSuccess ||
      cudaMalloc(&sfb, round_up(n, 128) * sf_k) != cudaSuccess ||
      (workspace && cudaMalloc(reinterpret_cast<void**>(&space), workspace) != cudaSuccess)) {
    std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
    return 2;
  }
  try {
    genericMxfp8GemmKernelLauncherSm120<TILECONFORM_T, Cta, CtaN, CtaK, Swap>(
        d, a, b, sfa, sfb, m, n, k, 1, config, space, workspace, nullptr, nullptr);
  } catch (std::exception const& e) {
    return write_verdict(run_dir, "threw", e.what(), workspace);
  }
  if (cudaStreamSynchronize(nullptr) != cudaSuccess) {
    return write_verdict(run_dir, "threw", cudaGetErrorString(cudaGetLastError()), workspace);
  }
  return write_verdict(run_dir, "returned", "", workspace);
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
