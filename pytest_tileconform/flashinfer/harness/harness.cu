// Conformance harness for instantiations of TensorRT-LLM's (FlashInfer's) MoE grouped GEMM
// launcher `tma_warp_specialized_generic_moe_gemm_kernelLauncher`.
//
// This file is not compiled on its own: codegen.py emits a unit of two translation units. One
// includes cudart_probe.h and the launcher .inl and instantiates one or more configurations
// with INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM (as FlashInfer's generate_kernels.py does,
// several per file); the other (TILECONFORM_HARNESS_PART defined, compiled beside it) includes
// this file and then defines the case table (kCases, kCaseCount): per instantiation its name,
// its KernelConfig as JSON and run_case<C> for a struct C with
//
//   launcher                   the instantiated launcher, through a pointer the other unit defines
//   arch                       SM version the kernel was compiled for (90, 100, 120, ...)
//   act_bits, weight_bits, out_bits
//                              storage bits per element of A, B and D
//   swap_ab                    must match the instantiation
//   block_scale                0 none, 1 NVFP4 (e4m3 scale per 16), 2 MXFPX (ue8m0 per 32):
//                              the launcher's IsBlockScaled operands, read from a_sf.bin/b_sf.bin
//   finalize                   EpilogueFusion::FINALIZE instantiated
//   activation                 EpilogueFusion::ACTIVATION instantiated (ClampedRelu2 epilogue;
//                              D is in the activation type, out_bits its bits; clamp_limit.bin)
//   d_scaled                   activation fusion with MXFP8 D: the epilogue also writes ue8m0
//                              scales per 32 along N, kept after D in D's buffer (PROTOCOL.md)
//   mixed                      SM90's mixed-input launcher (sm90_generic_mixed_moe_*Launcher);
//                              then also Act, Weight, Out (its types), group and scale_bytes
//                              (B's scales: elements per scale along K, bytes per scale),
//                              interleave (FlashInfer's quant_type of the weight interleave),
//                              tile_k (the CTA's K, for a release that packs scales per CTA K),
//                              pre_mma (ue8m0 scales folded in before the MMA) and small_k
//                              (a single-warpgroup kernel); see harness_mixed.h
//
// Usage: harness RUN_DIR [CASE]; CASE (a KernelConfig name) may be left out when the
// executable holds one case. Linked as a shared library instead, a unit exports
// tileconform_run_case (end of this file), which the runner (runner.cpp) calls. Inputs,
// outputs and stages are described in PROTOCOL.md beside this file; the parts live in
// harness_verdict.h (verdict.json), harness_inputs.h (inputs, the launcher's input) and
// harness_stages.h (hooks, CUDA graphs, D run to run, pending errors).
//
// CUDA runtime entry points the harness calls itself (keep this list short, a fake runtime must
// provide them): cudaGetDeviceCount, cudaGetDeviceProperties, cudaDeviceGetAttribute,
// cudaMalloc, cudaFree, cudaMemcpy, cudaMemset, cudaMemsetAsync, cudaStreamCreate,
// cudaStreamDestroy, cudaStreamSynchronize, cudaDeviceSynchronize, cudaGetLastError,
// cudaGetErrorName, cudaGetErrorString, cudaEventCreate, cudaEventRecord, cudaEventSynchronize,
// cudaEventElapsedTime, cudaEventDestroy and cudaGetDriverEntryPointByVersion (the graph stage's
// driver calls). The full list of cudart symbols in a linked harness (including those used by
// CUTLASS) is in PROTOCOL.md.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

// From here on the harness talks to the CUDA runtime directly (see cudart_probe.h).
#undef cudaFuncSetAttribute
#undef cudaLaunchKernelExC
#undef cudaLaunchKernelEx
#undef cudaGetLastError

// What differs between FlashInfer releases is defined by the generated unit before it includes
// this file (features.harness_defines, read from the release's own sources).
#if !defined(TILECONFORM_HAS_ACTIVATION_FUSION) || !defined(TILECONFORM_HAS_PRECOMPUTED_SCHEDULER)
#error "the generated unit defines the release's pieces (TILECONFORM_HAS_*) before harness.cu"
#endif
#include "harness_inputs.h"
#include "harness_stages.h"
#include "harness_verdict.h"

namespace tileconform {

// ------------------------------------------------------------------------------------------
// Launcher call and classification of its exceptions

// TensorRT-LLM reports CUTLASS failures as TllmException with a fixed message per stage
// (moe_gemm_tma_ws_launcher.inl): "<prefix>. Error: <cutlassGetStatusString>".
void classify_launcher_exception(const std::string& what, Verdict& verdict) {
  struct Marker {
    const char* text;
    const char* stage;
  };
  static const Marker markers[] = {
      {"Grouped GEMM kernel will fail for params", "can_implement"},
      {"Failed to initialize cutlass TMA WS grouped gemm", "initialize"},
      {"Failed to run cutlass TMA WS grouped gemm", "launch"},
      // moe_gemm_tma_ws_mixed_input_launcher.inl
      {"mixed dtype WS grouped cutlass kernel will fail for params", "can_implement"},
      {"Failed to initialize cutlass mixed dtype WS grouped gemm", "initialize"},
      {"Failed to run cutlass mixed dtype WS grouped gemm", "launch"},
  };
  verdict.message = what;
  for (const auto& m : markers) {
    const auto pos = what.find(m.text);
    if (pos == std::string::npos) continue;
    verdict.stage = m.stage;
    const std::string error_tag = "Error: ";
    auto begin = what.find(error_tag, pos);
    if (begin == std::string::npos) {
      verdict.status = "unknown";
      return;
    }
    begin += error_tag.size();
    // TllmException appends " (file:line)\n<backtrace>" to the message.
    const auto end = what.find_first_of("(\n", begin);
    std::string status =
        what.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    while (!status.empty() && status.back() == ' ') status.pop_back();
    verdict.status = status;
    return;
  }
  // sync_check_cuda_error() inside the launcher (only active without NDEBUG).
  if (what.find("CUDA runtime error in") != std::string::npos) {
    verdict.stage = "run";
    verdict.status = "cuda_error";
    return;
  }
  // Any other TLLM_CHECK/TLLM_THROW (workspace too small, swap_ab mismatch, ...): the launcher
  // refused what the harness prepared for it, before CUTLASS judged the kernel.
  verdict.stage = "prepare";
  verdict.status = "exception";
}

// Defined in harness_mixed.h, which only mixed-input units include.
template <class C>
DeviceBuffer interleave_weights(const DeviceBuffer& b, const ProblemInfo& p);
template <class C>
DeviceBuffer kernel_scales(const DeviceBuffer& folded, const ProblemInfo& p);
template <class C>
GemmSetup make_mixed_input(const ProblemInfo& p, const Operands& ops);

// A dynamic-CGA instantiation (SM10x) takes its cluster at run time, as FlashInfer's dispatch
// hands the tactic's dynamic and fallback cluster shapes to the launcher; a static one ignores them.
// The mixed-input launcher takes TensorRT-LLM's GroupedGemmInput beside the TMA WS input, of
// which it reads the expert count, N, K, D's base, the alpha pointers and the group size.
template <class C>
void call_launcher(const GemmSetup& setup, const ProblemInfo& p, int sm_count, cudaStream_t stream,
                   size_t* workspace_size) {
  if constexpr (C::mixed) {
    using Grouped = tensorrt_llm::kernels::cutlass_kernels::GroupedGemmInput<
        typename C::Act, typename C::Weight, typename C::Out, typename C::Out>;
    Grouped grouped{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                    static_cast<typename C::Out*>(setup.d_base), setup.input.alpha_scale_ptr_array,
                    nullptr, {}, p.total_rows(), p.n, p.k, p.experts, C::group};
    grouped.stream = stream;
    C::launcher(grouped, setup.input, sm_count, workspace_size);
  } else {
    using Cluster = cute::Shape<int32_t, int32_t, cute::_1>;
    C::launcher(setup.input, p.experts, sm_count, stream, /*kernel_occupancy=*/nullptr, workspace_size,
                Cluster{p.cluster_shape[0], p.cluster_shape[1], cute::_1{}},
                Cluster{p.fallback_cluster_shape[0], p.fallback_cluster_shape[1], cute::_1{}});
  }
}

// ------------------------------------------------------------------------------------------

DeviceInfo query_device() {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw StageError("setup", "cudaErrorNoDevice", "no CUDA device visible");
  DeviceInfo info;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  check_cuda(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, 0),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  check_cuda(
      cudaDeviceGetAttribute(&info.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
      "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  return info;
}

// Finalize's output rows, checked against problem.txt: each permuted row's target must be in
// [0, out_rows); red.add is used iff two rows share a target (TensorRT-LLM: top_k > 1).
void check_dest_rows(const int32_t* dest, int64_t total, ProblemInfo& p) {
  std::vector<int> hits(p.out_rows, 0);
  for (int64_t r = 0; r < total; ++r) {
    const int32_t t = dest[r];
    if (t < 0 || t >= p.out_rows) {
      bad_input("dest_row: row " + std::to_string(r) + " targets " + std::to_string(t) +
                ", outside [0, out_rows)");
    }
    if (++hits[t] > 1) p.use_reduction = true;
  }
}

// The case's operands on the device, checked against problem.txt ("setup" when they are not
// what the problem says): read from the run directory's files and uploaded, or, when the runner
// mapped them (`table`), the worker's own buffers, used in place. D is always the harness's own.
template <class C>
Operands load_operands(const std::string& run_dir, const OperandTable& table, ProblemInfo& p) {
  using BS = BlockScale<C::block_scale>;
  const int64_t total = p.total_rows();
  if constexpr (C::block_scale != 0) {
    if (p.k % BS::vec != 0) {
      bad_input("problem.txt: k must be a multiple of the scale block " + std::to_string(BS::vec));
    }
  }
  struct Part {
    const char* name;
    size_t bytes;
    bool wanted;  // the case has this operand (the optional ones: when given)
    DeviceBuffer Operands::*member;
  };
  const bool has_alpha = table.given() ? table.has("alpha") : file_exists(run_dir + "/alpha.bin");
  p.bias = table.given() ? table.has("bias") : file_exists(run_dir + "/bias.bin");
  if (p.bias && !C::finalize) {
    bad_input("bias: FlashInfer hands a bias to the GEMM only with the finalize epilogue");
  }
  if constexpr (C::d_scaled) {
    if (p.n % BlockScale<2>::vec != 0) {
      bad_input("problem.txt: n must be a multiple of the output scale block " +
                std::to_string(BlockScale<2>::vec));
    }
  }
  const size_t sf_a = C::block_scale != 0 ? static_cast<size_t>(act_sf_offset<BS>(p.experts, total, p.k)) : 0;
  const size_t sf_b = C::block_scale != 0 ? static_cast<size_t>(weight_sf_offset<BS>(p.experts, p.n, p.k)) : 0;
  // mixed input: one scale per `group` along K for every weight row (folded by the Python side,
  // as FlashInfer's interleave_moe_scales_for_sm90_mixed_gemm), alpha per expert or per row
  size_t group_scales = 0;
  bool has_token_scales = false;
  if constexpr (C::mixed) {
    if (p.k % 128 != 0 || p.n % 64 != 0) {
      bad_input("problem.txt: the mixed-input kernels' folded scales need k % 128 == 0 and n % 64 == 0");
    }
    group_scales = static_cast<size_t>(int64_t{p.experts} * p.n * (p.k / C::group) * C::scale_bytes);
    has_token_scales = table.given() ? table.has("token_scales") : file_exists(run_dir + "/token_scales.bin");
    if (has_token_scales && !C::pre_mma) {
      bad_input("token_scales: only the fp8 x MXFP4 kernels scale each row (alpha is per expert)");
    }
  }
  const Part parts[] = {
      {"a", storage_bytes(total * p.k, C::act_bits), true, &Operands::a},
      {"b", storage_bytes(int64_t{p.experts} * p.n * p.k, C::weight_bits), true, &Operands::b},
      {"alpha", sizeof(float) * p.experts, has_alpha, &Operands::alpha},
      {"a_sf", sf_a, C::block_scale != 0, &Operands::a_sf},
      {"b_sf", sf_b, C::block_scale != 0, &Operands::b_sf},
      {"bias", storage_bytes(int64_t{p.experts} * p.n, C::out_bits), p.bias, &Operands::bias},
      {"router_scales", sizeof(float) * total, C::finalize, &Operands::router_scales},
      {"dest_row", sizeof(int32_t) * total, C::finalize, &Operands::dest_row},
      {"b_scale", group_scales, C::mixed, &Operands::b_scale},
      {"token_scales", sizeof(float) * total, has_token_scales, &Operands::token_scales},
      {"clamp_limit", sizeof(float), C::activation, &Operands::clamp_limit},
  };
  Operands ops;
  std::vector<char> dest;  // dest_row on the host, to check it
  for (const Part& part : parts) {
    if (!part.wanted) continue;
    if (table.given()) {
      ops.*part.member = table.borrow(part.name, part.bytes);
      continue;
    }
    std::vector<char> host = read_file(run_dir + "/" + part.name + ".bin", part.bytes);
    ops.*part.member = upload_vector(host);
    if (std::strcmp(part.name, "dest_row") == 0) dest = std::move(host);
  }
  if (C::finalize) {
    if (table.given()) {
      dest.resize(ops.dest_row.bytes());
      check_cuda(cudaMemcpy(dest.data(), ops.dest_row.as<void>(), dest.size(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy dest_row D2H");
    }
    std::vector<int32_t> rows(total);
    std::memcpy(rows.data(), dest.data(), sizeof(int32_t) * total);
    check_dest_rows(rows.data(), total, p);
  }
  ops.d = DeviceBuffer(d_bytes<C>(p));
  if constexpr (C::mixed) {
    ops.b_packed = interleave_weights<C>(ops.b, p);
    ops.b_scale_kernel = kernel_scales<C>(ops.b_scale, p);
  }
  return ops;
}

// The launcher's calls that compute D, each between the hook's two points, and D reset to what
// it holds before a run (FlashInfer zeroes the finalize output before GEMM2; without fusion the
// poison shows any element no run wrote).
template <class C>
struct Runs {
  const GemmSetup& setup;
  const ProblemInfo& p;
  const DeviceBuffer& d;
  int sm_count;
  cudaStream_t stream;
  Hook& hook;
  int calls = 0;

  unsigned char d_initial() const { return C::finalize ? 0 : kPoisonByte; }

  void reset_d(const char* stage) const {
    if (C::finalize || p.poison) {
      check_cuda(cudaMemsetAsync(d.as<void>(), d_initial(), d.bytes(), stream), "cudaMemsetAsync D",
                 stage);
    }
  }

  // `stage`: where a refusal by the launcher lands; the checked run's (null) is classified by
  // its message (can_implement, initialize, launch), a later stage's is that stage's verdict
  // with the launcher's status (a kernel accepted once and refused when run again or captured)
  void launch(const char* stage = nullptr, bool capturing = false) {
    hook.call(TILECONFORM_HOOK_BEFORE_LAUNCH, calls, capturing);
    try {
      call_launcher<C>(setup, p, sm_count, stream, nullptr);
    } catch (const std::exception& e) {
      if (stage == nullptr) throw;
      Verdict refused;
      classify_launcher_exception(e.what(), refused);
      throw StageError(stage, refused.status, e.what());
    }
    hook.call(TILECONFORM_HOOK_AFTER_LAUNCH, calls, capturing);
    ++calls;
  }

  void finish(const char* stage) const {
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", stage);
    check_cuda(cudaGetLastError(), "cudaGetLastError", stage);
  }
};

// If the process dies from here on (crash, hang + kill), Python sees this stage.
void running(const std::string& run_dir, Verdict& verdict, const char* stage, const char* what) {
  verdict.stage = stage;
  verdict.status = "incomplete";
  verdict.message = std::string("the harness process ended while ") + what;
  write_verdict(run_dir, verdict);
}

template <class C>
void graph_stage(Runs<C>& runs, CheckedD& checked, const std::string& run_dir, Verdict& verdict) {
  const GraphApi api = GraphApi::load();
  running(run_dir, verdict, "graph", "the run was captured into a CUDA graph or replayed");
  verdict.graph.ran = true;
  CapturedGraph captured{api};
  // global capture mode, torch.cuda.graph's default: a call that is unsafe during capture fails
  api.check(api.begin_capture(runs.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  try {
    runs.launch("graph", /*capturing=*/true);
  } catch (...) {
    CUgraph abandoned = nullptr;
    api.end_capture(runs.stream, &abandoned);
    if (abandoned != nullptr) api.destroy(abandoned);
    throw;
  }
  api.check(api.end_capture(runs.stream, &captured.graph), "cuStreamEndCapture");
  api.check(api.instantiate(&captured.exec, captured.graph, 0), "cuGraphInstantiateWithFlags");
  for (int i = 0; i < runs.p.graph_replays; ++i) {
    runs.reset_d("graph");
    api.check(api.launch(captured.exec, runs.stream), "cuGraphLaunch");
    runs.finish("graph");
    checked.note_run(verdict.graph, "graph");
  }
}

template <class C>
void repeat_stage(Runs<C>& runs, CheckedD& checked, const std::string& run_dir, Verdict& verdict) {
  running(run_dir, verdict, "repeat", "the case was run again");
  verdict.repeat.ran = true;
  for (int i = 0; i < runs.p.repeats; ++i) {
    runs.reset_d("repeat");
    runs.launch("repeat");
    runs.finish("repeat");
    checked.note_run(verdict.repeat, "repeat");
  }
}

}  // namespace tileconform
#include "harness_sequence.h"
namespace tileconform {

template <class C>
void time_launcher(Runs<C>& runs, Verdict& verdict) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate", "run");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate", "run");
  check_cuda(cudaEventRecord(start, runs.stream), "cudaEventRecord", "run");
  for (int i = 0; i < runs.p.timing_iters; ++i) {
    call_launcher<C>(runs.setup, runs.p, runs.sm_count, runs.stream, nullptr);
  }
  check_cuda(cudaEventRecord(stop, runs.stream), "cudaEventRecord", "run");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize", "run");
  float total_ms = 0.f;
  check_cuda(cudaEventElapsedTime(&total_ms, start, stop), "cudaEventElapsedTime", "run");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  verdict.kernel_ms = static_cast<double>(total_ms) / runs.p.timing_iters;
}

// The launcher's input for `ops`; a failure to build it is the harness's preparation failing.
template <class C>
GemmSetup make_setup(const ProblemInfo& p, const Operands& ops) {
  try {
    if constexpr (C::mixed) {
      return make_mixed_input<C>(p, ops);
    } else {
      return make_gemm_input<C>(p, ops);
    }
  } catch (const StageError&) {
    throw;
  } catch (const std::exception& e) {
    throw StageError("prepare", "exception", e.what());
  }
}

template <class C>
void run_stages(const std::string& run_dir, const OperandTable& table, Verdict& verdict, Hook& hook) {
  ProblemInfo& p = verdict.problem;
  verdict.device = query_device();
  verdict.have_device = true;
  const int device_sm = verdict.device.cc_major * 10 + verdict.device.cc_minor;
  if (device_sm != C::arch) {
    throw StageError("setup", "arch_mismatch",
                     "kernel compiled for sm_" + std::to_string(C::arch) +
                         ", device is sm_" + std::to_string(device_sm));
  }
  // only now: without a usable device the runtime's first error is that (setup), not a pending one
  if (clear_pending(verdict, "before the case")) {
    const ClearedError& e = verdict.cleared_errors.back();
    throw StageError("prepare", e.name, "a CUDA error was pending before the case (cleared): " + e.string);
  }

  const Operands ops = load_operands<C>(run_dir, table, p);

  GemmSetup setup = make_setup<C>(p, ops);

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};

  const int sm = verdict.device.sm_count;
  size_t workspace_bytes = 0;
  try {  // the size query returns before CUTLASS judges anything: a refusal is ours
    call_launcher<C>(setup, p, sm, stream, &workspace_bytes);
  } catch (const std::exception& e) {
    throw StageError("prepare", "exception", e.what());
  }
  verdict.workspace_bytes = static_cast<long long>(workspace_bytes);
  DeviceBuffer workspace(workspace_bytes);
  if (p.poison && workspace_bytes > 0) {
    check_cuda(cudaMemset(workspace.as<void>(), kPoisonByte, workspace_bytes), "cudaMemset workspace");
  }
  setup.input.gemm_workspace = workspace.as<uint8_t>();
  setup.input.gemm_workspace_size = workspace_bytes;

  Runs<C> runs{setup, p, ops.d, sm, stream, hook};
  hook.context.stream = stream;
  hook.context.d = ops.d.as<void>();
  hook.context.d_bytes = ops.d.bytes();
  hook.context.d_initial_byte = runs.d_initial();
  hook.context.workspace = workspace.as<void>();
  hook.context.workspace_bytes = workspace_bytes;

  CheckedD checked(ops.d, C::out_bits, run_dir, table, p, stream);
  running(run_dir, verdict, "run", "the launcher or the kernel was running");
  runs.reset_d("setup");
  runs.launch();
  runs.finish("run");
  checked.keep("run");
  const bool sequence = p.sequence_runs > 0 || p.sequence_replays > 0;
  std::unique_ptr<SequenceCheck> sequence_check;
  if (sequence) {
    sequence_check = std::make_unique<SequenceCheck>(ops.d, C::out_bits, table);
    sequence_check->keep();
  }

  if (p.graph_replays > 0) graph_stage(runs, checked, run_dir, verdict);
  if (p.repeats > 0) repeat_stage(runs, checked, run_dir, verdict);
  if (sequence) sequence_stage(runs, ops, *sequence_check, run_dir, verdict);
  if (p.timing_iters > 0) time_launcher(runs, verdict);

  verdict.stage = "pass";
  verdict.status = "Success";
  verdict.message.clear();
}

// One case: its problem, its hook around everything. An error pending before it (found once the
// device is known, run_stages) is cleared and fails the case at prepare: the state the case
// would run in is not the clean one it must start from (no case is judged on a runtime some
// earlier call left an error in).
template <class C>
void run_case(const std::string& run_dir, const OperandTable& table, Verdict& verdict) {
  verdict.problem = read_problem(run_dir + "/problem.txt", C::finalize, C::dynamic_cga);
  verdict.have_problem = true;
  Hook hook(verdict.problem, run_dir, verdict.case_name);
  hook.call(TILECONFORM_HOOK_BEFORE_CASE);
  tileconform_cudart_probe() = TileconformCudartProbe{};  // what CUTLASS reports is this case's
  try {
    run_stages<C>(run_dir, table, verdict, hook);
  } catch (...) {
    hook.call(TILECONFORM_HOOK_AFTER_CASE);
    throw;
  }
  hook.call(TILECONFORM_HOOK_AFTER_CASE);
}

// The executable's cases, defined by the generated translation unit after this file.
struct CaseEntry {
  const char* name;         // KernelConfig.name
  const char* config_json;  // KernelConfig as JSON, echoed into verdict.json
  void (*run)(const std::string& run_dir, const OperandTable& table, Verdict& verdict);
};
extern const CaseEntry kCases[];
extern const int kCaseCount;

const CaseEntry* find_case(const char* name) {
  for (int i = 0; i < kCaseCount; ++i) {
    if (name != nullptr && std::strcmp(kCases[i].name, name) == 0) return &kCases[i];
  }
  return nullptr;
}

}  // namespace tileconform

// Runs case CASE_NAME with its inputs in RUN_DIR and writes RUN_DIR/verdict.json. Returns 0 if
// it passed, 1 for any other verdict, 2 if this unit has no such case. Sets *context_lost when
// the device is unusable afterwards (a trap or a fault leaves a sticky error in the context):
// a process that runs further cases must end and be started again. A pending (non-sticky)
// error is cleared before and after the case and recorded in its verdict.
//
// Exported so that the runner (runner.cpp) can run the cases of many units in one process,
// with one CUDA context; the executable form (main below) runs one case.
//
// tileconform_run_case_on does the same with the case's operands in device memory
// (tileconform_operands.h) instead of its operand files.
extern "C" __attribute__((visibility("default"))) int tileconform_run_case_on(
    const char* run_dir, const char* case_name, int* context_lost,
    const TileconformOperand* operands, int count) {
  using namespace tileconform;
  *context_lost = 0;
  const CaseEntry* entry = find_case(case_name);
  if (entry == nullptr) return 2;
  tileconform_cudart_probe() = TileconformCudartProbe{};
  Verdict verdict;
  verdict.config_json = entry->config_json;
  verdict.case_name = entry->name;
  try {
    entry->run(run_dir, OperandTable(operands, count), verdict);
  } catch (const StageError& e) {
    verdict.stage = e.stage;
    verdict.status = e.status;
    verdict.message = e.what();
  } catch (const std::exception& e) {
    classify_launcher_exception(e.what(), verdict);
  }
  if (verdict.have_device) settle_errors(verdict, context_lost);
  verdict.final_ = true;
  write_verdict(run_dir, verdict);
  return verdict.stage == "pass" ? 0 : 1;
}

extern "C" __attribute__((visibility("default"))) int tileconform_run_case(const char* run_dir,
                                                                          const char* case_name,
                                                                          int* context_lost) {
  return tileconform_run_case_on(run_dir, case_name, context_lost, nullptr, 0);
}

int main(int argc, char** argv) {
  using namespace tileconform;
  const char* name = argc == 3 ? argv[2] : (kCaseCount == 1 ? kCases[0].name : nullptr);
  if ((argc != 2 && argc != 3) || find_case(name) == nullptr) {
    std::fprintf(stderr, "usage: %s RUN_DIR%s\n", argv[0], kCaseCount == 1 ? " [CASE]" : " CASE");
    std::fprintf(stderr, "cases in this executable:\n");
    for (int i = 0; i < kCaseCount; ++i) std::fprintf(stderr, "  %s\n", kCases[i].name);
    return 2;
  }
  int context_lost = 0;
  return tileconform_run_case(argv[1], name, &context_lost);
}
