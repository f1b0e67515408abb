// Tactics probe of FlashInfer's SM90 fpA_intB GEMM: asks TensorRT-LLM's heuristic, as compiled
// from FlashInfer's sources, for the configurations CutlassFpAIntBGemmRunner::getConfigs() offers
// on an SM90 device, in its order (the autotuner's tactic id is the index). Host code only.
//
// getConfigs() (fpA_intB_gemm_template.h) asks get_candidate_configs(sm_, SPLIT_K_LIMIT, HOPPER)
// with WEIGHT_ONLY added when the activation and weight types differ, which they always do here
// (W4A16, W8A16). One JSON line per tactic: tactic, tile_bytes [M, N, K bytes of the activation]
// (CutlassTileConfigSM90's CtaShapeMxNxKB), cluster, mainloop and epilogue schedule numbers and
// cuda_kernel (the runner's appended CUDA-core kernel config; its gemm() never reads the flag).
#include <cstdio>
#include <tuple>

#include "tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.h"
#include "tensorrt_llm/kernels/cutlass_kernels/fpA_intB_gemm/fpA_intB_gemm.h"

// the runner's SPLIT_K_LIMIT, a protected constant of its interface
struct RunnerLimits : tensorrt_llm::kernels::cutlass_kernels::CutlassFpAIntBGemmRunnerInterface {
  static constexpr int split_k_limit = SPLIT_K_LIMIT;
};

int main() {
  using namespace tensorrt_llm::cutlass_extensions;
  auto const param = static_cast<CutlassGemmConfig::CandidateConfigTypeParam>(
      CutlassGemmConfig::HOPPER | CutlassGemmConfig::WEIGHT_ONLY);
  auto const configs =
      tensorrt_llm::kernels::cutlass_kernels::get_candidate_configs(90, RunnerLimits::split_k_limit, param);
  int tactic = 0;
  for (auto const& c : configs) {
    auto const [m, n, k] = enum_to_shape_tuple(c.tile_config_sm90);
    auto const [cm, cn, ck] = enum_to_shape_tuple(c.cluster_shape);
    std::printf(
        "{\"tactic\": %d, \"tile_bytes\": [%d, %d, %d], \"cluster\": [%d, %d, %d], \"mainloop\": %d, "
        "\"epilogue\": %d, \"cuda_kernel\": %s}\n",
        tactic++, m, n, k, cm, cn, ck, static_cast<int>(c.mainloop_schedule),
        static_cast<int>(c.epilogue_schedule), c.enableCudaKernel ? "true" : "false");
  }
  return 0;
}
