// What the harness adds around the launcher's calls (part of harness.cu, see there): the hook
// a case may name, CUDA-graph capture and replay through the driver API, the comparison of D
// run to run, and the clearing of CUDA errors a case leaves pending.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <type_traits>
#include <string>
#include <vector>

#include "harness_verdict.h"
#include "tileconform_hook.h"

namespace tileconform {

// The case's hook library (tileconform_hook.h), if problem.txt names one. Libraries are loaded
// once per path and never unloaded: kernels they registered stay valid for the process.
class Hook {
 public:
  Hook(const ProblemInfo& p, const std::string& run_dir, const char* case_name)
      : arg_(p.hook_arg), run_dir_(run_dir), case_name_(case_name) {
    if (p.hook.empty()) return;
    static std::map<std::string, TileconformHook> loaded;
    auto found = loaded.find(p.hook);
    if (found == loaded.end()) {
      void* handle = dlopen(p.hook.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) bad_input(std::string("hook: ") + dlerror());
      auto fn = reinterpret_cast<TileconformHook>(dlsym(handle, "tileconform_hook"));
      if (fn == nullptr) bad_input("hook: " + p.hook + " has no tileconform_hook");
      found = loaded.emplace(p.hook, fn).first;
    }
    fn_ = found->second;
    context.version = TILECONFORM_HOOK_VERSION;
    context.run_dir = run_dir_.c_str();
    context.case_name = case_name_.c_str();
    context.arg = arg_.c_str();
    context.runtime_malloc = [](void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); };
  }

  void call(TileconformHookPoint point, int call = 0, bool capturing = false) {
    if (fn_ == nullptr) return;
    context.point = point;
    context.call = call;
    context.capturing = capturing ? 1 : 0;
    fn_(&context);
  }

  TileconformHookContext context{};  // stream, D and workspace are filled in as they exist

 private:
  TileconformHook fn_ = nullptr;
  std::string arg_, run_dir_, case_name_;
};

// ------------------------------------------------------------------------------------------
// CUDA graphs, through the driver API: its entry points are looked up at run time
// (cudaGetDriverEntryPointByVersion, which CUTLASS already uses for TMA descriptors), so a
// harness links no graph symbol of the runtime and the virtual device's runtime needs none.

struct GraphApi {
  CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*destroy)(CUgraph) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;

  static GraphApi load() {
    GraphApi api;
    auto entry = [](const char* symbol, auto& fn) {
      void* address = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess || address == nullptr) {
        throw StageError("setup", "graph_unavailable",
                         std::string("the CUDA driver has no ") + symbol + " for the graph stage");
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(address);
    };
    entry("cuStreamBeginCapture", api.begin_capture);
    entry("cuStreamEndCapture", api.end_capture);
    entry("cuGraphInstantiateWithFlags", api.instantiate);
    entry("cuGraphLaunch", api.launch);
    entry("cuGraphExecDestroy", api.exec_destroy);
    entry("cuGraphDestroy", api.destroy);
    entry("cuGetErrorName", api.error_name);
    return api;
  }

  // A failed driver call ends the case at the graph stage, with the driver's error name.
  void check(CUresult result, const char* what) const {
    if (result == CUDA_SUCCESS) return;
    const char* name = nullptr;
    error_name(result, &name);
    const std::string status = name != nullptr ? name : "CUDA_ERROR_UNKNOWN";
    throw StageError("graph", status, std::string(what) + ": " + status);
  }
};

// A captured graph, destroyed with its executable instance.
struct CapturedGraph {
  const GraphApi& api;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~CapturedGraph() {
    if (exec != nullptr) api.exec_destroy(exec);
    if (graph != nullptr) api.destroy(graph);
  }
};

// ------------------------------------------------------------------------------------------
// D run to run

// Elements (of `bits` bits) in which two copies of D differ.
long long changed_elements(const std::vector<char>& a, const std::vector<char>& b, int bits) {
  const size_t size = bits >= 8 ? static_cast<size_t>(bits / 8) : 1;
  long long changed = 0;
  for (size_t i = 0; i < a.size(); i += size) {
    if (std::memcmp(a.data() + i, b.data() + i, std::min(size, a.size() - i)) != 0) ++changed;
  }
  return changed;
}

void write_bytes(const std::string& path, const std::vector<char>& bytes, const char* stage) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw StageError(stage, "io_error", "cannot write " + path);
}

// Notes one more run of a replaying stage: its D against the checked run's; the D that changed
// most is saved as RUN_DIR/d.STAGE.bin for Python to check against the reference.
void note_run(ReplayInfo& info, const std::vector<char>& checked, const std::vector<char>& now,
              int bits, const std::string& run_dir, const char* stage) {
  ++info.runs;
  const long long changed = changed_elements(checked, now, bits);
  if (changed == 0) return;
  ++info.changed_runs;
  if (changed <= info.most_changed) return;
  info.most_changed = changed;
  info.saved = std::string("d.") + stage + ".bin";
  write_bytes(run_dir + "/" + info.saved, now, stage);
}

// ------------------------------------------------------------------------------------------
// Errors a case leaves behind

// Clears a pending (non-sticky) CUDA error and records it: an error some earlier call left in
// this runtime must not be taken for one of the launcher's (CUTLASS reads cudaGetLastError
// after its launch).
void clear_pending(Verdict& verdict, const char* when) {
  const cudaError_t pending = cudaGetLastError();
  if (pending != cudaSuccess) {
    verdict.cleared_errors.push_back({when, cudaGetErrorName(pending), cudaGetErrorString(pending)});
  }
}

// After a case: a pending error is cleared and recorded; a sticky one (the context is lost, the
// device cannot synchronize) ends the process that runs the cases (`*context_lost`), and a case
// that had passed until then fails at run with it.
void settle_errors(Verdict& verdict, int* context_lost) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (synced == cudaSuccess) {
    clear_pending(verdict, "after the case");
    return;
  }
  *context_lost = 1;
  if (verdict.stage == "pass") {
    verdict.stage = "run";
    verdict.status = cudaGetErrorName(synced);
    verdict.message = std::string("the CUDA context did not survive the case: ") +
                      cudaGetErrorString(synced);
  }
}

}  // namespace tileconform
