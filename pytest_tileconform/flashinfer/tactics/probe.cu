// Tactics probe: asks FlashInfer's own host code which MoE GEMM configurations it offers and
// which of them its TMA warp-specialized dispatch accepts. Host code only: no kernel is compiled
// or launched, no GPU is needed.
//
//   tactics SM...     (e.g. `tactics 90 120`)
//
// For every SM given and every runner FlashInfer's fused-MoE module instantiates for it
// (the CutlassMoeFCRunner<...> its binding, flashinfer_cutlass_fused_moe_binding.cu, makes for a
// dtype combination), prints one JSON line per tactic of GEMM 1 and GEMM 2, numbered as the
// binding numbers them: its FusedMoeRunner concatenates getTactics(GEMM_1) and
// getTactics(GEMM_2) into mAllProfiles, and a tactic id (the autotuner's, a profile id, a
// blocklist entry) is an index into that list, so GEMM 2's ids start at GEMM 1's count:
//
//   (a) offered:  CutlassMoeFCRunner<...>::getTactics(sm, gemm)  (moe_kernels.h): the static twin
//       of the member the binding calls, with use_fused_finalize (FlashInfer's default) and the
//       SM as a parameter instead of the current device's. It calls MoeGemmRunner::getConfigs
//       (moe_gemm_template_dispatch.h), which calls get_candidate_configs (cutlass_heuristic.cpp),
//       duplicates the configs with the FINALIZE epilogue fusion for GEMM 2 when
//       mayHaveFinalizeFused(sm) and again with swap_ab, then appends the non-TMA (SM80-style)
//       configs; an MXFP8 runner drops those (filterMxfp8Tactics);
//   (b) dispatch: for each TMA warp-specialized config, dispatchMoeGemmSelectTileShapeTmaWarpSpecialized
//       (moe_gemm_template_dispatch_tma_ws.h) called as calcMaxWorkspaceSize calls it (workspace
//       query). The launcher template is defined below so that instead of running a kernel it
//       records which instantiation the dispatch selected; a rejection is the TllmException the
//       dispatch throws (its message is printed). SM90's mixed-input runners go through
//       sm90_dispatch_moe_mixed_dtype_gemm_to_cutlass instead, as MoeGemmRunner sends them, with
//       the mixed-input launchers defined likewise.
//
// The JSON keys: sm, runner, gemm, tactic (the autotuner's id), tma_ws, tile_bytes [M,N,K bytes]
// (TMA configs: the enum's CtaShapeMxNxKB), cluster, fusion, swap_ab, epilogue_schedule,
// mainloop_schedule, dynamic_cluster, fallback_cluster, dispatch ("accepted" | "rejected" |
// "not_tma"), instantiation {arch, tile [M,N,K elements], cluster, fusion, mx, swap_ab,
// dynamic_cga, epilogue_schedule and, for a mixed-input kernel, mainloop} and error.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "tensorrt_llm/kernels/cutlass_kernels/include/moe_kernels.h"
#include "tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_template_dispatch.h"

namespace tc {
struct Selected {
  bool set = false;
  int arch = 0;
  int tile[3] = {0, 0, 0};
  int cluster[3] = {0, 0, 0};
  int fusion = 0;
  bool mx = false;
  bool swap_ab = false;
  bool dynamic_cga = false;
  std::string schedule;
  std::string mainloop;  // SM90 mixed input: the launcher's mainloop ("" for the uniform launcher)
};
Selected selected;

// The mixed-input launchers' choice: always the swapped product, no fusion.
template <typename TileShape, typename ClusterShape>
void select_mixed(char const* mainloop) {
  selected.set = true;
  selected.arch = 90;
  selected.tile[0] = cute::size<0>(TileShape{});
  selected.tile[1] = cute::size<1>(TileShape{});
  selected.tile[2] = cute::size<2>(TileShape{});
  selected.cluster[0] = cute::size<0>(ClusterShape{});
  selected.cluster[1] = cute::size<1>(ClusterShape{});
  selected.cluster[2] = cute::size<2>(ClusterShape{});
  selected.swap_ab = true;
  selected.schedule = "void";
  selected.mainloop = mainloop;
}
}  // namespace tc

namespace tensorrt_llm::kernels::cutlass_kernels_oss {
// Definition of the launcher FlashInfer generates one explicit instantiation of per
// configuration (generate_kernels.py); here it only records what the dispatch chose.
template <typename Arch, typename T, typename WeightType, typename OutputType,
          typename EpilogueSchedule, typename EpilogueTag,
          TmaWarpSpecializedGroupedGemmInput::EpilogueFusion FUSION, typename TileShape,
          typename ClusterShape, bool IsMXFPX, bool DYNAMIC_CGA, bool BIAS, bool SwapAB>
void tma_warp_specialized_generic_moe_gemm_kernelLauncher(
    TmaWarpSpecializedGroupedGemmInput, int, int, cudaStream_t, int*, size_t* workspace_size,
    cute::Shape<int32_t, int32_t, cute::_1>, cute::Shape<int32_t, int32_t, cute::_1>) {
  tc::selected.set = true;
  tc::selected.arch = Arch::kMinComputeCapability;
  tc::selected.tile[0] = cute::size<0>(TileShape{});
  tc::selected.tile[1] = cute::size<1>(TileShape{});
  tc::selected.tile[2] = cute::size<2>(TileShape{});
  tc::selected.cluster[0] = cute::size<0>(ClusterShape{});
  tc::selected.cluster[1] = cute::size<1>(ClusterShape{});
  tc::selected.cluster[2] = cute::size<2>(ClusterShape{});
  tc::selected.fusion = static_cast<int>(FUSION);
  tc::selected.mx = IsMXFPX;
  tc::selected.swap_ab = SwapAB;
  tc::selected.dynamic_cga = DYNAMIC_CGA;
  if constexpr (std::is_void_v<EpilogueSchedule>) {
    tc::selected.schedule = "void";
  } else if constexpr (std::is_same_v<EpilogueSchedule, cutlass::epilogue::PtrArrayNoSmemWarpSpecialized> ||
                       std::is_same_v<EpilogueSchedule, cutlass::epilogue::PtrArrayNoSmemWarpSpecialized1Sm> ||
                       std::is_same_v<EpilogueSchedule, cutlass::epilogue::PtrArrayNoSmemWarpSpecialized2Sm>) {
    // the SM100 dispatch names the schedule without 1Sm/2Sm (getDispatchFunctionForSM100)
    tc::selected.schedule = "NO_SMEM";
  } else {
    tc::selected.schedule = "TMA";
  }
  if (workspace_size) *workspace_size = 0;
}

// SM90's mixed-input launchers (moe_gemm_tma_ws_mixed_input_launcher.h), likewise: the
// warp-specialized one (Pingpong or Cooperative) and the single-warpgroup small-K one.
template <typename T, typename WeightType, typename GemmOutputType, typename EpilogueTag,
          typename CTAShape, typename ClusterShape, typename MainloopScheduleType,
          typename EpilogueScheduleType, cutlass::WeightOnlyQuantOp QuantOp,
          cutlass::gemm::collective::MixedInputScaleMode ScaleMode>
void sm90_generic_mixed_moe_gemm_kernelLauncher(GroupedGemmInput<T, WeightType, GemmOutputType, GemmOutputType>,
                                                TmaWarpSpecializedGroupedGemmInput, int, size_t* workspace_size) {
  constexpr bool pingpong = std::is_same_v<MainloopScheduleType, cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  tc::select_mixed<CTAShape, ClusterShape>(pingpong ? "pingpong" : "cooperative");
  if (workspace_size) *workspace_size = 0;
}

template <typename T, typename WeightType, typename GemmOutputType, typename EpilogueTag,
          typename CTAShape, typename ClusterShape, typename MainloopScheduleType,
          typename EpilogueScheduleType, cutlass::WeightOnlyQuantOp QuantOp,
          cutlass::gemm::collective::MixedInputScaleMode ScaleMode,
          tensorrt_llm::cutlass_extensions::MainloopScheduleType KernelType>
void sm90_generic_mixed_moe_small_k_kernelLauncher(GroupedGemmInput<T, WeightType, GemmOutputType, GemmOutputType>,
                                                   TmaWarpSpecializedGroupedGemmInput, int, size_t* workspace_size) {
  constexpr bool prefill = KernelType == tensorrt_llm::cutlass_extensions::MainloopScheduleType::SINGLE_WARPGROUP_PREFILL;
  tc::select_mixed<CTAShape, ClusterShape>(prefill ? "single_warpgroup_prefill" : "single_warpgroup_rolling");
  if (workspace_size) *workspace_size = 0;
}
}  // namespace tensorrt_llm::kernels::cutlass_kernels_oss

namespace {
using namespace tensorrt_llm;
using cutlass_extensions::CutlassGemmConfig;
using kernels::cutlass_kernels::MoeGemmRunner;
using kernels::cutlass_kernels::TmaWarpSpecializedGroupedGemmInput;
using Fusion = TmaWarpSpecializedGroupedGemmInput::EpilogueFusion;

std::string json_string(std::string const& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string triple(int a, int b, int c) {
  return "[" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "]";
}

template <typename E>
std::string shape_of(E e) {
  if (static_cast<int>(e) <= 0) return "null";
  auto [m, n, k] = cutlass_extensions::enum_to_shape_tuple(e);
  return triple(m, n, k);
}

int tile_enum(CutlassGemmConfig const& c) {
  if (c.sm_version == 90) return static_cast<int>(c.tile_config_sm90);
  if (c.sm_version >= 100 && c.sm_version < 120) return static_cast<int>(c.tile_config_sm100);
  if (c.sm_version >= 120) return static_cast<int>(c.tile_config_sm120);
  return static_cast<int>(c.tile_config_sm80);
}

// What a dispatch did with one config (tc::selected, filled by the launcher definitions above, or
// the message it threw): JSON fields.
std::string dispatch_fields(std::string const& error) {
  if (tc::selected.set) {
    auto const& s = tc::selected;
    return ",\"dispatch\":\"accepted\",\"instantiation\":{\"arch\":" + std::to_string(s.arch) +
            ",\"tile\":" + triple(s.tile[0], s.tile[1], s.tile[2]) +
            ",\"cluster\":" + triple(s.cluster[0], s.cluster[1], s.cluster[2]) +
            ",\"fusion\":\"" + (s.fusion == static_cast<int>(Fusion::FINALIZE) ? "finalize" : "none") +
            "\",\"mx\":" + (s.mx ? "true" : "false") +
            ",\"swap_ab\":" + (s.swap_ab ? "true" : "false") +
            ",\"dynamic_cga\":" + (s.dynamic_cga ? "true" : "false") +
            ",\"epilogue_schedule\":\"" + s.schedule + "\"" +
            (s.mainloop.empty() ? std::string() : ",\"mainloop\":\"" + s.mainloop + "\"") + "}";
  } else {
    // the first line of TensorRT-LLM's message (the rest is a backtrace), past a first line
    // that only names the throwing function (the dispatch's "%s\nUnsupported tile ...")
    std::string first = error.substr(0, error.find('\n'));
    if (first.find(" [with ") != std::string::npos && first.size() < error.size()) {
      std::string const rest = error.substr(first.size() + 1);
      first = rest.substr(0, rest.find('\n'));
    }
    // TLLM_CHECK appends " (FILE:LINE)": this machine's path, not part of FlashInfer's answer
    if (std::size_t const at = first.rfind(" (/"); at != std::string::npos && first.back() == ')') {
      first.erase(at);
    }
    return ",\"dispatch\":\"rejected\",\"error\":" + json_string(first.empty() ? "no launcher selected" : first);
  }
}

// FlashInfer's TMA warp-specialized dispatch with one config, as the workspace query calls it.
template <typename T, typename W, typename Out>
std::string dispatched(CutlassGemmConfig const& config, TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType scaling,
                       bool finalize) {
  TmaWarpSpecializedGroupedGemmInput input{};
  input.fpX_block_scaling_type = scaling;
  input.swap_ab = config.swap_ab;
  tc::selected = tc::Selected{};
  size_t workspace = 0;
  std::string error;
  try {
    if (finalize) {
      kernels::cutlass_kernels_oss::dispatchMoeGemmSelectTileShapeTmaWarpSpecialized<
          T, W, Out, cutlass_extensions::EpilogueOpDefault, Fusion::FINALIZE>(
          input, 8, config, 1, cudaStream_t{0}, nullptr, &workspace);
    } else {
      kernels::cutlass_kernels_oss::dispatchMoeGemmSelectTileShapeTmaWarpSpecialized<
          T, W, Out, cutlass_extensions::EpilogueOpDefault, Fusion::NONE>(
          input, 8, config, 1, cudaStream_t{0}, nullptr, &workspace);
    }
  } catch (std::exception const& e) {
    error = e.what();
  }
  return dispatch_fields(error);
}

// SM90's mixed-input dispatch with one config, as MoeGemmRunner::dispatchToArch calls it for a
// mixed-input runner (moe_gemm_template_dispatch.h): W4A8 with the scale pack factor of a K that
// is a multiple of 512 (the factor selects no kernel), the MXFP4 runners with their scale mode.
template <typename T, typename W, typename Out, int PackFactor, kernels::cutlass_kernels::Sm90Wfp4Afp8ScaleMode Mode>
std::string dispatched_mixed(CutlassGemmConfig const& config) {
  kernels::cutlass_kernels::GroupedGemmInput<T, W, Out, Out> inputs{};
  inputs.gemm_config = config;
  TmaWarpSpecializedGroupedGemmInput hopper{};
  hopper.swap_ab = config.swap_ab;
  tc::selected = tc::Selected{};
  size_t workspace = 0;
  std::string error;
  try {
    kernels::cutlass_kernels_oss::sm90_dispatch_moe_mixed_dtype_gemm_to_cutlass<
        T, W, Out, cutlass_extensions::EpilogueOpDefault, PackFactor, Mode>(inputs, hopper, 8, &workspace);
  } catch (std::exception const& e) {
    error = e.what();
  }
  return dispatch_fields(error);
}

// A runner FlashInfer builds SM80-style kernels for only (W4A16 int4, W8A16): no config of its
// list is TMA warp-specialized, and none could be dispatched as one.
struct NoTma {
  static std::string dispatch(CutlassGemmConfig const&, TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType, bool) {
    return ",\"dispatch\":\"rejected\",\"error\":\"no TMA warp-specialized kernel for this runner\"";
  }
};

// How a runner's TMA configs are dispatched: FlashInfer's TMA WS dispatch for MoeGemmRunner<T, W,
// Out>, or SM90's mixed-input one (with its scale pack factor and mode).
template <typename T, typename W, typename Out>
struct Uniform {
  static std::string dispatch(CutlassGemmConfig const& config, TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType scaling,
                              bool finalize) {
    return dispatched<T, W, Out>(config, scaling, finalize);
  }
};
template <typename T, typename W, typename Out, int PackFactor,
          kernels::cutlass_kernels::Sm90Wfp4Afp8ScaleMode Mode = kernels::cutlass_kernels::Sm90Wfp4Afp8ScaleMode::kDisabled>
struct Mixed {
  static std::string dispatch(CutlassGemmConfig const& config, TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType, bool) {
    return dispatched_mixed<T, W, Out, PackFactor, Mode>(config);
  }
};

// FCRunner: the CutlassMoeFCRunner the binding constructs for the dtypes (its switch_output_type);
// Dispatch: how the MoeGemmRunner it holds dispatches each tactic (Uniform or Mixed).
template <typename FCRunner, typename Dispatch>
void probe_runner(int sm, char const* runner, TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType scaling) {
  int tactic = 0;
  for (int gemm = 1; gemm <= 2; ++gemm) {
    std::vector<CutlassGemmConfig> configs;
    std::string offered_error;
    try {
      configs = FCRunner::getTactics(sm, gemm == 1 ? kernels::cutlass_kernels::MoeGemmId::GEMM_1 : kernels::cutlass_kernels::MoeGemmId::GEMM_2);
    } catch (std::exception const& e) {
      offered_error = e.what();
    }
    if (!offered_error.empty()) {
      std::printf("{\"sm\":%d,\"runner\":\"%s\",\"gemm\":%d,\"offered_error\":%s}\n", sm, runner,
                  gemm, json_string(offered_error).c_str());
      continue;
    }
    for (auto const& config : configs) {
      std::string line = "{\"sm\":" + std::to_string(sm) + ",\"runner\":\"" + runner +
                         "\",\"gemm\":" + std::to_string(gemm) +
                         ",\"tactic\":" + std::to_string(tactic++) +
                         ",\"config_sm\":" + std::to_string(config.sm_version) +
                         ",\"tma_ws\":" + (config.is_tma_warp_specialized ? "true" : "false") +
                         ",\"tile_enum\":" + std::to_string(tile_enum(config));
      if (config.is_tma_warp_specialized) {
        int const e = tile_enum(config);
        auto [m, n, k] = cutlass_extensions::enum_to_shape_tuple(static_cast<cutlass_extensions::CutlassTileConfigSM90>(e > 0 ? e : 0));
        line += ",\"tile_bytes\":" + (e > 0 ? triple(m, n, k) : std::string("null"));
        line += ",\"cluster\":" + shape_of(config.cluster_shape);
        line += ",\"dynamic_cluster\":" + shape_of(config.dynamic_cluster_shape);
        line += ",\"fallback_cluster\":" + shape_of(config.fallback_cluster_shape);
        line += ",\"epilogue_schedule\":" + std::to_string(static_cast<int>(config.epilogue_schedule));
        line += ",\"mainloop_schedule\":" + std::to_string(static_cast<int>(config.mainloop_schedule));
        bool const finalize = config.epilogue_fusion_type == CutlassGemmConfig::EpilogueFusionType::FINALIZE;
        line += std::string(",\"fusion\":\"") + (finalize ? "finalize" : "none") + "\"";
        line += std::string(",\"swap_ab\":") + (config.swap_ab ? "true" : "false");
        line += Dispatch::dispatch(config, scaling, finalize);
      } else {
        line += ",\"dispatch\":\"not_tma\"";
      }
      std::printf("%s}\n", line.c_str());
    }
  }
}

void probe(int sm) {
  using Scaling = TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType;
  using kernels::cutlass_kernels::CutlassMoeFCRunner;
  using kernels::cutlass_kernels::Fp4Type;
  using bf16 = __nv_bfloat16;
  using fp8 = __nv_fp8_e4m3;
  // FusedMoeRunner's constructor (the binding): bf16 and fp16 as CutlassMoeFCRunner<T, T>,
  // fp32 likewise (moe_gemm_kernels_fp32_fp32.cu), FP8 and NVFP4 (FP4 activations) through
  // switch_output_type<Act, Weight> (CutlassMoeFCRunner<Act, Weight, Out, Act, Out>), MXFP8 x
  // MXFP4 (SM100 and up) through switch_output_type<fp8, Fp4>, MXFP8 x MXFP8 (SM100) as the FP8
  // runner with IsMXFPX, whose quant params (QuantParams::MXFP8MXFP8) ask for MX scaling. The dispatch of each runner's
  // MoeGemmRunner<T, W, Out> (moe_gemm_kernels_{bf16_bf16,...,fp8_fp4}.cu) is asked about its tactics.
  probe_runner<CutlassMoeFCRunner<bf16, bf16>, Uniform<bf16, bf16, bf16>>(sm, "bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<half, half>, Uniform<half, half, half>>(sm, "fp16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<float, float>, Uniform<float, float, float>>(sm, "fp32", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, fp8, bf16, fp8, bf16>, Uniform<fp8, fp8, bf16>>(sm, "fp8_e4m3-bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, fp8, half, fp8, half>, Uniform<fp8, fp8, half>>(sm, "fp8_e4m3-fp16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<Fp4Type, Fp4Type, bf16, Fp4Type, bf16>, Uniform<Fp4Type, Fp4Type, bf16>>(
      sm, "nvfp4-bf16", Scaling::NVFP4);
  probe_runner<CutlassMoeFCRunner<Fp4Type, Fp4Type, half, Fp4Type, half>, Uniform<Fp4Type, Fp4Type, half>>(
      sm, "nvfp4-fp16", Scaling::NVFP4);
  probe_runner<CutlassMoeFCRunner<fp8, Fp4Type, bf16, fp8, bf16>, Uniform<fp8, Fp4Type, bf16>>(
      sm, "mxfp8xmxfp4-bf16", Scaling::MXFPX);
  probe_runner<CutlassMoeFCRunner<fp8, Fp4Type, half, fp8, half>, Uniform<fp8, Fp4Type, half>>(
      sm, "mxfp8xmxfp4-fp16", Scaling::MXFPX);
  if (sm >= 100 && sm < 120) {  // FlashInfer builds MXFP8 x MXFP8 kernels for SM10x only
    // switch_output_type<fp8, fp8, false, true>: the runner with IsMXFPX, whose getTactics drops
    // the configs that are not TMA warp-specialized (filterMxfp8Tactics)
    probe_runner<CutlassMoeFCRunner<fp8, fp8, bf16, fp8, bf16, true>, Uniform<fp8, fp8, bf16>>(sm, "mxfp8-bf16", Scaling::MXFPX);
    probe_runner<CutlassMoeFCRunner<fp8, fp8, half, fp8, half, true>, Uniform<fp8, fp8, half>>(sm, "mxfp8-fp16", Scaling::MXFPX);
  }
}

// SM90's mixed-input runners, as the binding constructs them: W4A16 (int4 weights, fp16/bf16
// activations), W4A8 with int4 group scaling (fp8 activations), W8A16 with fp8 weights, W4A16
// MXFP4 (bf16 x FP4, isWFP4A16Quant) and the Humming-style MXFP4 x FP8.
void probe_sm90_mixed(int sm) {
  using Scaling = TmaWarpSpecializedGroupedGemmInput::FpXBlockScalingType;
  using kernels::cutlass_kernels::CutlassMoeFCRunner;
  using kernels::cutlass_kernels::Fp4Type;
  using Mode = kernels::cutlass_kernels::Sm90Wfp4Afp8ScaleMode;
  using bf16 = __nv_bfloat16;
  using fp8 = __nv_fp8_e4m3;
  using int4 = cutlass::uint4b_t;
  probe_runner<CutlassMoeFCRunner<half, int4>, NoTma>(sm, "fp16xint4-fp16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<bf16, int4>, NoTma>(sm, "bf16xint4-bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, int4, half, half>, Mixed<fp8, int4, half, 4>>(sm, "fp8_e4m3xint4-fp16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, int4, bf16, bf16>, Mixed<fp8, int4, bf16, 4>>(sm, "fp8_e4m3xint4-bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<bf16, fp8>, NoTma>(sm, "bf16xfp8_e4m3-bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<bf16, Fp4Type>, Mixed<bf16, Fp4Type, bf16, 1>>(sm, "bf16xmxfp4-bf16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, Fp4Type, half, half, half, false, Mode::kHummingPreMmaE8M0>,
               Mixed<fp8, Fp4Type, half, 1, Mode::kHummingPreMmaE8M0>>(sm, "fp8_e4m3xmxfp4-fp16", Scaling::NONE);
  probe_runner<CutlassMoeFCRunner<fp8, Fp4Type, bf16, bf16, bf16, false, Mode::kHummingPreMmaE8M0>,
               Mixed<fp8, Fp4Type, bf16, 1, Mode::kHummingPreMmaE8M0>>(sm, "fp8_e4m3xmxfp4-bf16", Scaling::NONE);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SM...  (e.g. 90 100 120)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    long sm = std::strtol(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || sm < 70 || sm > 200) {
      std::fprintf(stderr, "tactics: %s is not an SM number (e.g. 90, 120)\n", argv[i]);
      return 2;
    }
    probe(static_cast<int>(sm));
    if (sm == 90) probe_sm90_mixed(90);
  }
  std::fflush(stdout);
  return 0;
}
