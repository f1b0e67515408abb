// FlashInfer's SM120 MXFP8 launcher for tactics t4/t5 of mxfp8_gemm_cutlass_sm120 (CTA 128x128x128,
// swap_ab false/true), instantiated as mxfp8_gemm_cutlass_sm120.jinja renders it and driven through
// its own path (workspace query, then can_implement, initialize, run) on the virtual SM120.
// Built and run by lab/dense/mxfp8-sm120-virtual.sh; issue 35's step 2, not yet a backend harness.
#include <cstdio>
#include <stdexcept>
#include "flashinfer/gemm/mxfp8_gemm_cutlass_template_sm120.h"
namespace flashinfer { namespace gemm {
INSTANTIATE_MXFP8_GEMM_KERNEL_LAUNCHER_SM120(half, 128, 128, 128, true)
INSTANTIATE_MXFP8_GEMM_KERNEL_LAUNCHER_SM120(half, 128, 128, 128, false)
}}
using namespace flashinfer::gemm;
template <bool Swap> int one(const char* name) {
  int m = 256, n = 256, k = 512;
  CutlassGemmConfig cfg(CutlassTileConfigSM120::CtaShape128x128x128B, MainloopScheduleType::AUTO,
                        EpilogueScheduleType::AUTO, ClusterShape::ClusterShape_1x1x1, Swap);
  using L = cute::Int<128>;
  size_t ws = genericMxfp8GemmKernelLauncherSm120<half, L, L, L, Swap>(nullptr, nullptr, nullptr, nullptr, nullptr,
      m, n, k, 1, cfg, nullptr, 0, nullptr, nullptr);
  void *A, *B, *D, *sa, *sb; char* w = nullptr;
  cudaMalloc(&A, m * k); cudaMalloc(&B, n * k); cudaMalloc(&D, m * n * 2);
  cudaMalloc(&sa, m * k / 32 * 4); cudaMalloc(&sb, n * k / 32 * 4);
  if (ws) cudaMalloc((void**)&w, ws);
  try {
    genericMxfp8GemmKernelLauncherSm120<half, L, L, L, Swap>(D, A, B, sa, sb, m, n, k, 1, cfg, w, ws, nullptr, nullptr);
    std::printf("%s: pass (workspace %zu)\n", name, ws);
  } catch (std::exception const& e) {
    std::printf("%s: %s\n", name, e.what());
  }
  return 0;
}
int main() { one<false>("t4_128x128x128_c1x1x1"); one<true>("t5_128x128x128_c1x1x1_swapab"); }
