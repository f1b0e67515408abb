// The harness of FlashInfer's SM90 fpA_intB GEMM (TensorRT-LLM's CUTLASS mixed-input GEMM, W4A16
// and W8A16): included after the unit FlashInfer's generator renders for one operation
// (generate_sm90_mixed_gemm_operations, get_file_content with fpA_intB_launcher_sm90.inl), with
// TILECONFORM_LAUNCHER (the launcher exactly as that file instantiates it), TILECONFORM_TILE_NAME
// and TILECONFORM_CLUSTER_NAME (the tactic's CutlassTileConfigSM90 and ClusterShape) defined by
// the unit.
//
// It drives the launcher as CutlassFpAIntBGemmRunner does on SM90: the workspace its
// getWorkspaceSize gives an SM90 device (stream-K's worst case for this device's SM count), then
// the call that runs get_workspace_size, can_implement, initialize and run; sm90_dispatch_gemm_
// to_cutlass reaches the same instantiation for this tactic (its schedules are the generator's).
//
// Usage: harness RUN_DIR M N K GROUP MODE [REPLAYS REPEATS]
//   MODE launch: drive() of dense_verdict.h with the runner's workspace, the operands allocated,
//     not filled (the virtual device judges through launch);
//   MODE check: a.bin, b.bin and s.bin of RUN_DIR are the operands (as the launcher reads them);
//     D (filled with 0xFF bytes first) is written to d.bin; then, with REPLAYS > 0, the launch is
//     captured in a CUDA graph and replayed, and with REPEATS > 0 run again, each D compared with
//     the checked run's bit for bit (the one that changed most saved as d.graph.bin / d.repeat.bin).
// verdict.json (dense_verdict.h) says whether the launcher returned or threw; "stages" adds what
// the checked run, the graph and the repeats did.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "dense_verdict.h"
#include "tensorrt_llm/kernels/cutlass_kernels/fpA_intB_gemm/fpA_intB_gemm.h"

namespace tileconform_dense {
namespace tkc = tensorrt_llm::cutlass_extensions;

// The operand types, read off the instantiation FlashInfer renders.
template <class F>
struct LauncherTypes;
template <class A, class W, class S, class B, class O>
struct LauncherTypes<void (*)(A const*, W const*, S const*, S const*, B const*, float, O*, int,
                              int, int, int, tkc::CutlassGemmConfig, char*, size_t, cudaStream_t,
                              int*)> {
  using Act = A;
  using Weight = W;
  using Scale = S;
  using Out = O;
};
using Types = LauncherTypes<decltype(&TILECONFORM_LAUNCHER)>;
using Act = Types::Act;
using Scale = Types::Scale;
using Out = Types::Out;
constexpr int kWeightBits = cutlass::sizeof_bits<Types::Weight>::value;
constexpr unsigned char kPoisonByte = 0xFF;

struct Problem {
  int m, n, k, group;
  size_t a_bytes() const { return static_cast<size_t>(m) * k * sizeof(Act); }
  size_t b_bytes() const { return static_cast<size_t>(n) * k * kWeightBits / 8; }
  size_t s_bytes() const { return static_cast<size_t>((k + group - 1) / group) * n * sizeof(Scale); }
  size_t d_bytes() const { return static_cast<size_t>(m) * n * sizeof(Out); }
};

// The runner's tile limits, protected constants of its interface.
struct RunnerLimits : tensorrt_llm::kernels::cutlass_kernels::CutlassFpAIntBGemmRunnerInterface {
  static constexpr int max_m_tile = MAX_M_TILE_SM90;
  static constexpr int max_n_tile = MAX_N_TILE_SM90;
};

// CutlassFpAIntBGemmRunner::getWorkspaceSize on an SM90 device: stream-K's largest need for the
// device's SM count, whatever the problem.
inline size_t runner_workspace() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  int const max_sk_tiles = 2 * sms;
  return static_cast<size_t>(2 * max_sk_tiles + sms) * RunnerLimits::max_m_tile *
         RunnerLimits::max_n_tile * sizeof(float);
}

struct Operands {
  void *a = nullptr, *b = nullptr, *s = nullptr, *d = nullptr;
  char* space = nullptr;
};

inline void launch(const Operands& o, const Problem& p, size_t workspace, cudaStream_t stream) {
  tkc::CutlassGemmConfig config(tkc::CutlassTileConfigSM90::TILECONFORM_TILE_NAME,
                                tkc::MainloopScheduleType::AUTO, tkc::EpilogueScheduleType::AUTO,
                                tkc::ClusterShape::TILECONFORM_CLUSTER_NAME);
  TILECONFORM_LAUNCHER(static_cast<Act const*>(o.a), static_cast<Types::Weight const*>(o.b),
                       static_cast<Scale const*>(o.s), nullptr, nullptr, 1.0f,
                       static_cast<Out*>(o.d), p.m, p.n, p.k, p.group, config, o.space, workspace,
                       stream, nullptr);
}

inline bool read_file(const std::string& path, void* device, size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || static_cast<size_t>(in.tellg()) != bytes) return false;
  std::vector<char> host(bytes);
  in.seekg(0);
  in.read(host.data(), static_cast<std::streamsize>(bytes));
  return in && cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

inline bool write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// One replaying stage: how many runs, how many changed D, the error that ended it ("" if none).
struct Replays {
  int runs = 0, changed_runs = 0;
  long long most_changed = 0;
  std::string error;
  std::string json() const {
    return "{\"runs\": " + std::to_string(runs) + ", \"changed_runs\": " +
           std::to_string(changed_runs) + ", \"most_changed\": " + std::to_string(most_changed) +
           ", \"error\": " + json_string(error) + "}";
  }
};

// Runs of a stage after the checked one, each D compared with the checked D element by element.
class Stage {
 public:
  Stage(const Operands& o, const Problem& p, const std::vector<char>& checked, std::string saved)
      : o_(o), p_(p), checked_(checked), saved_(std::move(saved)) {}

  // D filled with the poison bytes before a run, finished before the run's stream starts (a
  // graph replays on a stream of its own, unordered with the default stream's memset)
  bool poison() {
    return (cudaMemset(o_.d, kPoisonByte, p_.d_bytes()) == cudaSuccess &&
            cudaDeviceSynchronize() == cudaSuccess) ||
           fail("cudaMemset D");
  }
  bool fail(const std::string& what) {
    if (info.error.empty()) info.error = what + ": " + cudaGetErrorString(cudaGetLastError());
    return false;
  }
  // After a run has finished: its D against the checked one.
  bool note() {
    if (cudaDeviceSynchronize() != cudaSuccess) return fail("the run");
    std::vector<char> now(p_.d_bytes());
    if (cudaMemcpy(now.data(), o_.d, now.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      return fail("cudaMemcpy D");
    }
    ++info.runs;
    long long changed = 0;
    for (size_t i = 0; i < now.size(); i += sizeof(Out)) {
      changed += std::memcmp(now.data() + i, checked_.data() + i, sizeof(Out)) != 0;
    }
    if (changed > 0) ++info.changed_runs;
    if (changed > info.most_changed) {
      info.most_changed = changed;
      write_file(saved_, now);
    }
    return true;
  }
  Replays info;

 private:
  const Operands& o_;
  const Problem& p_;
  const std::vector<char>& checked_;
  std::string saved_;
};

// The graph entry points, looked up through the runtime (as CUTLASS finds cuTensorMapEncodeTiled),
// so that a harness links no graph symbol the virtual device's runtime would need.
struct GraphApi {
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
  bool load() {
    auto entry = [](const char* symbol, auto& fn) {
      void* address = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        return false;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
      return true;
    };
    return entry("cuStreamBeginCapture", begin) && entry("cuStreamEndCapture", end) &&
           entry("cuGraphInstantiateWithFlags", instantiate) && entry("cuGraphLaunch", launch);
  }
};

inline void graph_stage(Stage& stage, const Operands& o, const Problem& p, size_t workspace,
                        int replays) {
  GraphApi api;
  cudaStream_t stream = nullptr;
  if (!api.load()) {
    stage.info.error = "the driver has no graph entry points";
    return;
  }
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    stage.fail("cudaStreamCreate");
    return;
  }
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  // global capture mode: what torch.cuda.graph captures FlashInfer's calls with
  if (api.begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) {
    stage.info.error = "cuStreamBeginCapture failed";
    return;
  }
  try {
    launch(o, p, workspace, stream);
  } catch (std::exception const& e) {
    api.end(stream, &graph);
    stage.info.error = std::string("captured launch threw: ") + e.what();
    return;
  }
  if (api.end(stream, &graph) != CUDA_SUCCESS || api.instantiate(&exec, graph, 0) != CUDA_SUCCESS) {
    stage.info.error = "capturing or instantiating the graph failed";
    return;
  }
  for (int i = 0; i < replays; ++i) {
    if (!stage.poison()) return;
    if (api.launch(exec, stream) != CUDA_SUCCESS) {
      stage.info.error = "cuGraphLaunch failed";
      return;
    }
    if (!stage.note()) return;
  }
}

inline void repeat_stage(Stage& stage, const Operands& o, const Problem& p, size_t workspace,
                         int repeats) {
  for (int i = 0; i < repeats; ++i) {
    if (!stage.poison()) return;
    try {
      launch(o, p, workspace, nullptr);
    } catch (std::exception const& e) {
      stage.info.error = std::string("the launcher threw: ") + e.what();
      return;
    }
    if (!stage.note()) return;
  }
}

inline int judge(const std::string& dir, const Problem& p, bool check, int replays, int repeats) {
  if (!check) {
    // the runner's getWorkspaceSize stands for the launcher's query (it has none), then its gemm
    std::array<size_t, 4> const bytes{p.a_bytes(), p.b_bytes(), p.s_bytes(), p.d_bytes()};
    return drive(dir.c_str(), bytes, [&](std::array<void*, 4> const& ops, char* space, size_t size) {
      if (space == nullptr && size == 0 && ops[0] == nullptr) return runner_workspace();
      launch(Operands{ops[0], ops[1], ops[2], ops[3], space}, p, size, nullptr);
      return size;
    });
  }
  size_t const workspace = runner_workspace();
  Operands o;
  if (cudaMalloc(&o.a, p.a_bytes()) != cudaSuccess || cudaMalloc(&o.b, p.b_bytes()) != cudaSuccess ||
      cudaMalloc(&o.s, p.s_bytes()) != cudaSuccess || cudaMalloc(&o.d, p.d_bytes()) != cudaSuccess ||
      (workspace && cudaMalloc(reinterpret_cast<void**>(&o.space), workspace) != cudaSuccess)) {
    std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
    return 2;
  }
  if (!read_file(dir + "/a.bin", o.a, p.a_bytes()) || !read_file(dir + "/b.bin", o.b, p.b_bytes()) ||
      !read_file(dir + "/s.bin", o.s, p.s_bytes()) ||
      cudaMemset(o.d, kPoisonByte, p.d_bytes()) != cudaSuccess) {
    std::fprintf(stderr, "harness: the operand files of %s do not fit the problem\n", dir.c_str());
    return 2;
  }
  try {
    launch(o, p, workspace, nullptr);
  } catch (std::exception const& e) {
    return write_verdict(dir.c_str(), "threw", e.what(), workspace);
  }
  cudaError_t const ran = cudaDeviceSynchronize();
  std::string stages;
  std::vector<char> checked(p.d_bytes());
  if (ran != cudaSuccess ||
      cudaMemcpy(checked.data(), o.d, checked.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    // the kernel faulted (a sticky error): the run stage's, with the runtime's name for it
    stages = "{\"run\": " + json_string(cudaGetErrorName(ran != cudaSuccess ? ran : cudaGetLastError())) + "}";
  } else {
    write_file(dir + "/d.bin", checked);
    Stage graph(o, p, checked, dir + "/d.graph.bin"), repeat(o, p, checked, dir + "/d.repeat.bin");
    if (replays > 0) graph_stage(graph, o, p, workspace, replays);
    if (repeats > 0) repeat_stage(repeat, o, p, workspace, repeats);
    stages = "{\"run\": \"\", \"graph\": " + graph.info.json() + ", \"repeat\": " + repeat.info.json() + "}";
  }
  return write_verdict(dir.c_str(), "returned", "", workspace, stages);
}

}  // namespace tileconform_dense

int main(int argc, char** argv) {
  if (argc != 7 && argc != 9) {
    std::fprintf(stderr, "usage: %s RUN_DIR M N K GROUP MODE [REPLAYS REPEATS]\n", argv[0]);
    return 2;
  }
  tileconform_dense::Problem p{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                               std::atoi(argv[5])};
  bool const check = std::strcmp(argv[6], "check") == 0;
  int const replays = argc == 9 ? std::atoi(argv[7]) : 0;
  int const repeats = argc == 9 ? std::atoi(argv[8]) : 0;
  return tileconform_dense::judge(argv[1], p, check, replays, repeats);
}
