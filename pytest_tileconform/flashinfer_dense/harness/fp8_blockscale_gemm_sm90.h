// The harness of FlashInfer's SM90 FP8 block-scale GEMM (fp8_blockscale_gemm_sm90: TensorRT-LLM's
// CutlassFp8BlockScaleGemmRunner), compiled with the sources of FlashInfer's
// gen_fp8_blockscale_gemm_sm90_module in place of its TVM-FFI binding, whose calls it makes:
// DeepGEMM's JIT include directory set (get_fp8_blockscale_gemm_runner_sm90), the binding's three
// runners made, the workspace its get_workspace_size gives (the largest of the three) configured
// on all three, then run_gemm's call: the pre-quantized gemm for fp8 x fp8, else the one that
// quantizes bf16 operands itself (A per 1x128, B per 128x128) into the workspace.
//
// The dispatch is the runner's own: DeepGEMM's kernels (compiled by nvcc on first use, loaded
// through the driver) unless TRTLLM_DG_ENABLED=0, then the Fp8Gemm kernels built in; DISPATCH
// (deepgemm or static) sets that variable as a user would, before the first call.
//
// Usage: harness RUN_DIR DISPATCH ACT WEIGHT M N K BSCALES DG_INCLUDE MODE [REPLAYS REPEATS]
//   ACT, WEIGHT: bf16 or fp8_e4m3; BSCALES: the fp8 weight's scale block, 128x128 or 1x128
//     (none for bf16 weights); DG_INCLUDE: the directory FlashInfer gives DeepGEMM's JIT;
//   MODE launch: operands allocated, not filled (the virtual device judges through launch);
//   MODE check: a.bin, b.bin, sa.bin (fp8 A), sb.bin (fp8 B) of RUN_DIR are the operands as the
//     runner reads them; D (0xFF bytes first) is written to d.bin; then REPLAYS graph replays and
//     REPEATS runs, each D compared with the checked one bit for bit.
// verdict.json (dense_verdict.h): whether the runner returned or threw; "stages" adds what the
// checked run, the graph and the repeats did and DeepGEMM's configuration for the problem.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dense_verdict.h"
#include "tensorrt_llm/deep_gemm/compiler.cuh"
#include "tensorrt_llm/kernels/cutlass_kernels/fp8_blockscale_gemm/fp8_blockscale_gemm.h"

namespace tileconform_dense {
namespace fbg = tensorrt_llm::kernels::fp8_blockscale_gemm;
using Fp8 = __nv_fp8_e4m3;
using Bf16 = __nv_bfloat16;
constexpr unsigned char kPoisonByte = 0xFF;

struct Problem {
  int m, n, k;
  bool act_fp8, weight_fp8, b_per_row;
  int k_blocks() const { return (k + 127) / 128; }
  size_t a_bytes() const { return size_t(m) * k * (act_fp8 ? 1 : 2); }
  size_t b_bytes() const { return size_t(n) * k * (weight_fp8 ? 1 : 2); }
  // A's scales as the runner's 1x128 quantizer writes them: K/128 rows of M padded to 4
  size_t sa_bytes() const { return act_fp8 ? size_t(k_blocks()) * ((m + 3) / 4 * 4) * 4 : 0; }
  size_t sb_bytes() const {
    return weight_fp8 ? size_t(b_per_row ? n : (n + 127) / 128) * k_blocks() * 4 : 0;
  }
  size_t d_bytes() const { return size_t(m) * n * 2; }
};

// The binding's three runners (Fp8BlockScaleGemmRunner's constructor) and its workspace calls.
struct Runners {
  fbg::CutlassFp8BlockScaleGemmRunner<Bf16, Bf16, Bf16> bf16_bf16;
  fbg::CutlassFp8BlockScaleGemmRunner<Bf16, Fp8, Bf16> bf16_fp8;
  fbg::CutlassFp8BlockScaleGemmRunner<Fp8, Fp8, Bf16> fp8_fp8;
  size_t workspace(const Problem& p) {
    size_t size = bf16_bf16.getWorkspaceSizeBase(p.m, p.n, p.k, 1);
    size = std::max(size, bf16_fp8.getWorkspaceSizeBase(p.m, p.n, p.k, 1));
    return std::max(size, fp8_fp8.getWorkspaceSizeBase(p.m, p.n, p.k, 1));
  }
  void configure(char* space) {
    bf16_bf16.configureWorkspace(space);
    bf16_fp8.configureWorkspace(space);
    fp8_fp8.configureWorkspace(space);
  }
};

struct Operands {
  void *a = nullptr, *b = nullptr, *d = nullptr;
  float *sa = nullptr, *sb = nullptr;
};

// run_gemm's call for the problem's types (the binding's selectRunner and its two gemm()s).
inline void launch(Runners& r, const Operands& o, const Problem& p, cudaStream_t stream) {
  if (p.act_fp8 && p.weight_fp8) {
    r.fp8_fp8.gemm(static_cast<Fp8 const*>(o.a), p.k, static_cast<Fp8 const*>(o.b), p.k,
                   static_cast<Bf16*>(o.d), p.n, p.m, p.n, p.k, o.sa, o.sb, stream);
  } else if (p.weight_fp8) {
    r.bf16_fp8.gemm(o.d, o.a, o.b, p.m, p.n, p.k, stream, nullptr, o.sb);
  } else {
    r.bf16_bf16.gemm(o.d, o.a, o.b, p.m, p.n, p.k, stream, nullptr, nullptr);
  }
  // the built-in kernels' launches are not checked by the runner: a refused one is the launch's
  cudaError_t const launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    throw std::runtime_error(std::string("launch refused: ") + cudaGetErrorString(launched));
  }
}

// DeepGEMM's configuration for the problem as gemm_dispatch asks get_best_gemm_config (swap A
// and B below M 32): recorded with the verdict, not used by the run.
inline std::string deepgemm_config(const Problem& p) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return "null";
  }
  bool const swap = p.m < 32;
  auto [bm, bn, stages, multicast, smem] =
      swap ? deep_gemm::jit::get_best_gemm_config(p.n, p.m, p.k, 1, sms, false, true)
           : deep_gemm::jit::get_best_gemm_config(p.m, p.n, p.k, 1, sms);
  return "{\"block_m\": " + std::to_string(bm) + ", \"block_n\": " + std::to_string(bn) +
         ", \"stages\": " + std::to_string(stages) + ", \"multicast\": " + std::to_string(multicast) +
         ", \"smem\": " + std::to_string(smem) + ", \"swap_ab\": " + (swap ? "true" : "false") +
         ", \"sms\": " + std::to_string(sms) + "}";
}

inline bool read_file(const std::string& path, void* device, size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || static_cast<size_t>(in.tellg()) != bytes) return false;
  std::vector<char> host(bytes);
  in.seekg(0);
  in.read(host.data(), static_cast<std::streamsize>(bytes));
  return in && cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

inline void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The runs of a stage after the checked one: how many, how many changed D, the error that ended it.
struct Replays {
  int runs = 0, changed_runs = 0;
  long long most_changed = 0;
  std::string error;
  std::string json() const {
    return "{\"runs\": " + std::to_string(runs) + ", \"changed_runs\": " + std::to_string(changed_runs) +
           ", \"most_changed\": " + std::to_string(most_changed) + ", \"error\": " + json_string(error) + "}";
  }
  bool fail(const std::string& what) {
    if (error.empty()) error = what + ": " + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  bool poison(const Operands& o, const Problem& p) {
    return (cudaMemset(o.d, kPoisonByte, p.d_bytes()) == cudaSuccess &&
            cudaDeviceSynchronize() == cudaSuccess) ||
           fail("cudaMemset D");
  }
  // after a run: its D against the checked one, the one that changed most saved
  bool note(const Operands& o, const std::vector<char>& checked, const std::string& saved) {
    if (cudaDeviceSynchronize() != cudaSuccess) return fail("the run");
    std::vector<char> now(checked.size());
    if (cudaMemcpy(now.data(), o.d, now.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      return fail("cudaMemcpy D");
    }
    ++runs;
    long long changed = 0;
    for (size_t i = 0; i < now.size(); i += 2) changed += std::memcmp(&now[i], &checked[i], 2) != 0;
    changed_runs += changed > 0;
    if (changed > most_changed) {
      most_changed = changed;
      write_file(saved, now);
    }
    return true;
  }
};

// The graph entry points, looked up through the runtime (as fpA_intB_gemm_sm90.h does).
inline Replays graph_stage(Runners& r, const Operands& o, const Problem& p,
                           const std::vector<char>& checked, const std::string& saved, int replays) {
  Replays info;
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*replay)(CUgraphExec, CUstream) = nullptr;
  auto entry = [](const char* symbol, auto& fn) {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    bool const ok = cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) ==
                        cudaSuccess && found == cudaDriverEntryPointSuccess;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
    return ok;
  };
  if (!entry("cuStreamBeginCapture", begin) || !entry("cuStreamEndCapture", end) ||
      !entry("cuGraphInstantiateWithFlags", instantiate) || !entry("cuGraphLaunch", replay)) {
    info.error = "the driver has no graph entry points";
    return info;
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    info.fail("cudaStreamCreate");
    return info;
  }
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  // global capture mode: what torch.cuda.graph captures FlashInfer's calls with
  if (begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) {
    info.error = "cuStreamBeginCapture failed";
    return info;
  }
  try {
    launch(r, o, p, stream);
  } catch (std::exception const& e) {
    end(stream, &graph);
    info.error = std::string("captured launch threw: ") + e.what();
    return info;
  }
  if (end(stream, &graph) != CUDA_SUCCESS || instantiate(&exec, graph, 0) != CUDA_SUCCESS) {
    info.error = "capturing or instantiating the graph failed";
    return info;
  }
  for (int i = 0; i < replays; ++i) {
    if (!info.poison(o, p)) break;
    if (replay(exec, stream) != CUDA_SUCCESS) {
      info.error = "cuGraphLaunch failed";
      break;
    }
    if (!info.note(o, checked, saved)) break;
  }
  return info;
}

inline Replays repeat_stage(Runners& r, const Operands& o, const Problem& p,
                            const std::vector<char>& checked, const std::string& saved, int repeats) {
  Replays info;
  for (int i = 0; i < repeats; ++i) {
    if (!info.poison(o, p)) break;
    try {
      launch(r, o, p, nullptr);
    } catch (std::exception const& e) {
      info.error = std::string("the runner threw: ") + e.what();
      break;
    }
    if (!info.note(o, checked, saved)) break;
  }
  return info;
}

inline int judge(const std::string& dir, const Problem& p, bool check, int replays, int repeats) {
  Runners r;
  size_t workspace = 0;
  char* space = nullptr;
  Operands o;
  try {
    workspace = r.workspace(p);
  } catch (std::exception const& e) {
    return write_verdict(dir.c_str(), "threw", e.what(), 0);
  }
  auto alloc = [](auto** ptr, size_t bytes) {
    return bytes == 0 || cudaMalloc(reinterpret_cast<void**>(ptr), bytes) == cudaSuccess;
  };
  if (!alloc(&o.a, p.a_bytes()) || !alloc(&o.b, p.b_bytes()) || !alloc(&o.sa, p.sa_bytes()) ||
      !alloc(&o.sb, p.sb_bytes()) || !alloc(&o.d, p.d_bytes()) || !alloc(&space, workspace)) {
    std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
    return 2;
  }
  r.configure(space);
  if (check && (!read_file(dir + "/a.bin", o.a, p.a_bytes()) || !read_file(dir + "/b.bin", o.b, p.b_bytes()) ||
                (o.sa && !read_file(dir + "/sa.bin", o.sa, p.sa_bytes())) ||
                (o.sb && !read_file(dir + "/sb.bin", o.sb, p.sb_bytes())) ||
                cudaMemset(o.d, kPoisonByte, p.d_bytes()) != cudaSuccess)) {
    std::fprintf(stderr, "harness: the operand files of %s do not fit the problem\n", dir.c_str());
    return 2;
  }
  try {
    launch(r, o, p, nullptr);
  } catch (std::exception const& e) {
    return write_verdict(dir.c_str(), "threw", e.what(), workspace);
  }
  cudaError_t const ran = cudaDeviceSynchronize();
  std::string const config = "\"config\": " + deepgemm_config(p);
  if (!check) {
    if (ran != cudaSuccess) return write_verdict(dir.c_str(), "threw", cudaGetErrorString(ran), workspace);
    return write_verdict(dir.c_str(), "returned", "", workspace, "{" + config + "}");
  }
  std::vector<char> checked(p.d_bytes());
  std::string stages;
  if (ran != cudaSuccess ||
      cudaMemcpy(checked.data(), o.d, checked.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    // the kernel faulted (a sticky error): the run stage's, with the runtime's name for it
    stages = "{\"run\": " + json_string(cudaGetErrorName(ran != cudaSuccess ? ran : cudaGetLastError())) +
             ", " + config + "}";
  } else {
    write_file(dir + "/d.bin", checked);
    Replays const graph = replays > 0 ? graph_stage(r, o, p, checked, dir + "/d.graph.bin", replays) : Replays{};
    Replays const repeat = repeats > 0 ? repeat_stage(r, o, p, checked, dir + "/d.repeat.bin", repeats) : Replays{};
    stages = "{\"run\": \"\", \"graph\": " + graph.json() + ", \"repeat\": " + repeat.json() + ", " + config + "}";
  }
  return write_verdict(dir.c_str(), "returned", "", workspace, stages);
}

}  // namespace tileconform_dense

#ifdef TILECONFORM_VIRTUAL
// The virtual device runs no kernel and has no driver to load a run-time compiled library nor a
// run-time compiler: these stand in for the driver and NVRTC calls DeepGEMM's JIT makes
// (runtime.cuh, compiler.cuh) and refuse, so a DeepGEMM dispatch on the virtual device ends in
// its own CHECK_CUDA; the backend never judges one there (the built-in dispatch calls none).
extern "C" {
nvrtcResult nvrtcCreateProgram(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) {
  return NVRTC_ERROR_INTERNAL_ERROR;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char* const*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char*) { return NVRTC_ERROR_INTERNAL_ERROR; }
nvrtcResult nvrtcDestroyProgram(nvrtcProgram*) { return NVRTC_ERROR_INTERNAL_ERROR; }
const char* nvrtcGetErrorString(nvrtcResult) { return "no run-time compiler on the virtual device"; }
CUresult cuLibraryLoadData(CUlibrary*, const void*, CUjit_option*, void**, unsigned int,
                           CUlibraryOption*, void**, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuLibraryUnload(CUlibrary) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuLibraryGetKernelCount(unsigned int*, CUlibrary) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuLibraryEnumerateKernels(CUkernel*, unsigned int, CUlibrary) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuKernelGetName(const char**, CUkernel) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGetErrorString(CUresult, const char** text) {
  *text = "no driver on the virtual device";
  return CUDA_SUCCESS;
}
}
#endif

int main(int argc, char** argv) {
  if (argc != 11 && argc != 13) {
    std::fprintf(stderr,
                 "usage: %s RUN_DIR DISPATCH ACT WEIGHT M N K BSCALES DG_INCLUDE MODE [REPLAYS REPEATS]\n",
                 argv[0]);
    return 2;
  }
  setenv("TRTLLM_DG_ENABLED", std::strcmp(argv[2], "static") == 0 ? "0" : "1", 1);
  tileconform_dense::Problem const p{std::atoi(argv[5]),
                                     std::atoi(argv[6]),
                                     std::atoi(argv[7]),
                                     std::strcmp(argv[3], "fp8_e4m3") == 0,
                                     std::strcmp(argv[4], "fp8_e4m3") == 0,
                                     std::strcmp(argv[8], "1x128") == 0};
  // what get_fp8_blockscale_gemm_runner_sm90 does first: DeepGEMM's JIT told its include directory
  deep_gemm::jit::Compiler::setIncludeDirs({std::filesystem::path(argv[9])});
  bool const check = std::strcmp(argv[10], "check") == 0;
  int const replays = argc == 13 ? std::atoi(argv[11]) : 0;
  int const repeats = argc == 13 ? std::atoi(argv[12]) : 0;
  return tileconform_dense::judge(argv[1], p, check, replays, repeats);
}
