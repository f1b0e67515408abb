// The harness of fp4_gemm_cutlass_sm120 (NVFP4 x NVFP4): included after the unit FlashInfer's JIT
// renders from fp4_gemm_cutlass_sm120.jinja (one output type and CTA shape, both swap_ab, each with
// its data-parallel and its stream-K launcher), with TILECONFORM_T, TILECONFORM_CTA_M/N/K and
// TILECONFORM_TILE_NAME (the tactic's tile enum) defined by the unit. It drives the launcher the
// runner's dispatch picks for one tactic (use_stream_k: genericFp4GemmKernelLauncherStreamK, else
// genericFp4GemmKernelLauncher) as getWorkspaceSize and gemm do: a workspace query (null pointers),
// then the call that runs get_workspace_size, can_implement, initialize and run.
// Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K]
#include <cstdlib>
#include <exception>

#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;
using CtaM = cute::Int<TILECONFORM_CTA_M>;
using CtaN = cute::Int<TILECONFORM_CTA_N>;
using CtaK = cute::Int<TILECONFORM_CTA_K>;
using One = cute::Int<1>;

inline size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

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
  size_t workspace = 0;
  try {
    workspace = launch<Swap, StreamK>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, m, n, k,
                                      config, nullptr, 0);
  } catch (std::exception const& e) {
    return write_verdict(run_dir, "threw", e.what(), 0);
  }
  // the operands' bytes: e2m1 A and B (two per byte), one ue4m3 scale per 16 along K in 128 x 4
  // swizzled blocks, the fp32 global scale (alpha)
  void *a, *b, *d, *sfa, *sfb, *alpha;
  char* space = nullptr;
  size_t sf_k = round_up(static_cast<size_t>(k) / 16, 4);
  if (cudaMalloc(&a, static_cast<size_t>(m) * k / 2) != cudaSuccess ||
      cudaMalloc(&b, static_cast<size_t>(n) * k / 2) != cudaSuccess ||
      cudaMalloc(&d, static_cast<size_t>(m) * n * sizeof(TILECONFORM_T)) != cudaSuccess ||
      cudaMalloc(&sfa, round_up(m, 128) * sf_k) != cudaSuccess ||
      cudaMalloc(&sfb, round_up(n, 128) * sf_k) != cudaSuccess ||
      cudaMalloc(&alpha, sizeof(float)) != cudaSuccess ||
      (workspace && cudaMalloc(reinterpret_cast<void**>(&space), workspace) != cudaSuccess)) {
    std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
    return 2;
  }
  try {
    launch<Swap, StreamK>(d, a, b, sfa, sfb, static_cast<float const*>(alpha), m, n, k, config,
                          space, workspace);
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
