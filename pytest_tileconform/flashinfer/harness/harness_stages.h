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

#include "harness_inputs.h"
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

  // A failed driver call ends the case at the stage replaying the graph, with the driver's
  // error name.
  void check(CUresult result, const char* what, const char* stage = "graph") const {
    if (result == CUDA_SUCCESS) return;
    const char* name = nullptr;
    error_name(result, &name);
    const std::string status = name != nullptr ? name : "CUDA_ERROR_UNKNOWN";
    throw StageError(stage, status, std::string(what) + ": " + status);
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

void write_bytes(const std::string& path, const std::vector<char>& bytes, const char* stage) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw StageError(stage, "io_error", "cannot write " + path);
}

// Elements of type T in which two copies of D differ, counted into *count.
template <class T>
__global__ void tileconform_count_changed(const T* a, const T* b, size_t elements,
                                          unsigned long long* count) {
  unsigned long long local = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += stride) {
    local += a[i] != b[i] ? 1 : 0;
  }
  for (int offset = 16; offset > 0; offset /= 2) local += __shfl_down_sync(0xffffffffu, local, offset);
  if ((threadIdx.x & 31) == 0 && local != 0) atomicAdd(count, local);
}

// The checked run's D, which every later run's D is compared with, bit for bit. In file mode it
// is copied to the host and written as d.bin, a run that changed D most as d.STAGE.bin; with the
// operands in device memory it is copied into the worker's `d`, compared on the device, and the
// run that changed most is copied into `d_graph` / `d_repeat` (no D crosses to the host).
class CheckedD {
 public:
  CheckedD(const DeviceBuffer& d, int bits, const std::string& run_dir, const OperandTable& table,
           const ProblemInfo& p, cudaStream_t stream)
      : d_(d), size_(bits >= 8 ? bits / 8 : 1), run_dir_(run_dir), stream_(stream) {
    if (!table.given()) return;
    on_device_ = true;
    out_ = table.borrow("d", d.bytes());
    if (p.graph_replays > 0) graph_ = table.borrow("d_graph", d.bytes());
    if (p.repeats > 0) repeat_ = table.borrow("d_repeat", d.bytes());
    if (p.graph_replays > 0 || p.repeats > 0) count_ = DeviceBuffer(sizeof(unsigned long long));
  }

  // After the checked run (its stream synchronized).
  void keep(const char* stage) {
    if (on_device_) {
      copy(out_, stage);
      return;
    }
    host_ = to_host(stage);
    write_bytes(run_dir_ + "/d.bin", host_, stage);
  }

  // Notes one more run of a replaying stage (its stream synchronized): its D against the
  // checked run's; the D that changed most is saved for Python to check against the reference.
  void note_run(ReplayInfo& info, const char* stage) {
    ++info.runs;
    std::vector<char> now;
    const long long changed = on_device_ ? changed_on_device(stage) : changed_on_host(stage, now);
    if (changed == 0) return;
    ++info.changed_runs;
    if (changed <= info.most_changed) return;
    info.most_changed = changed;
    info.saved = std::string("d.") + stage + ".bin";
    if (on_device_) {
      copy(std::strcmp(stage, "graph") == 0 ? graph_ : repeat_, stage);
    } else {
      write_bytes(run_dir_ + "/" + info.saved, now, stage);
    }
  }

 private:
  std::vector<char> to_host(const char* stage) const {
    std::vector<char> host(d_.bytes());
    check_cuda(cudaMemcpy(host.data(), d_.as<void>(), d_.bytes(), cudaMemcpyDeviceToHost),
               "cudaMemcpy D2H", stage);
    return host;
  }

  void copy(const DeviceBuffer& to, const char* stage) const {
    check_cuda(cudaMemcpy(to.as<void>(), d_.as<void>(), d_.bytes(), cudaMemcpyDeviceToDevice),
               "cudaMemcpy D2D", stage);
  }

  long long changed_on_host(const char* stage, std::vector<char>& now) const {
    now = to_host(stage);
    long long changed = 0;
    for (size_t i = 0; i < now.size(); i += size_) {
      if (std::memcmp(host_.data() + i, now.data() + i, std::min(size_, now.size() - i)) != 0) ++changed;
    }
    return changed;
  }

  template <class T>
  void launch_count(size_t elements, unsigned long long* counter) const {
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((elements + 255) / 256, 4096));
    tileconform_count_changed<T><<<blocks, 256, 0, stream_>>>(out_.as<T>(), d_.as<T>(), elements, counter);
  }

  long long changed_on_device(const char* stage) const {
    auto* counter = count_.as<unsigned long long>();
    check_cuda(cudaMemsetAsync(counter, 0, sizeof(unsigned long long), stream_), "cudaMemsetAsync", stage);
    const size_t elements = d_.bytes() / size_;
    if (elements > 0) {
      switch (size_) {
        case 1: launch_count<unsigned char>(elements, counter); break;
        case 2: launch_count<unsigned short>(elements, counter); break;
        case 4: launch_count<unsigned int>(elements, counter); break;
        default: launch_count<unsigned long long>(elements, counter); break;
      }
    }
    check_cuda(cudaGetLastError(), "comparing D run to run", stage);
    unsigned long long changed = 0;
    check_cuda(cudaMemcpy(&changed, counter, sizeof(changed), cudaMemcpyDeviceToHost), "cudaMemcpy D2H", stage);
    return static_cast<long long>(changed);
  }

  const DeviceBuffer& d_;
  size_t size_;
  std::string run_dir_;
  cudaStream_t stream_;
  bool on_device_ = false;
  DeviceBuffer out_, graph_, repeat_, count_;
  std::vector<char> host_;
};

// ------------------------------------------------------------------------------------------
// Errors a case leaves behind

// Clears a pending (non-sticky) CUDA error and records it: an error some earlier call left in
// this runtime must not be taken for one of the launcher's (CUTLASS reads cudaGetLastError
// after its launch).
bool clear_pending(Verdict& verdict, const char* when) {
  const cudaError_t pending = cudaGetLastError();
  if (pending == cudaSuccess) return false;
  verdict.cleared_errors.push_back({when, cudaGetErrorName(pending), cudaGetErrorString(pending)});
  return true;
}

// After a case: a pending error is cleared and recorded, and a case that had passed until then
// fails at run with it (the case left it: its launcher's calls are the only ones since the check
// before the case); a sticky one (the context is lost, the device cannot synchronize) ends the
// process that runs the cases (`*context_lost`) and fails such a case at run too.
void settle_errors(Verdict& verdict, int* context_lost) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (synced == cudaSuccess) {
    if (clear_pending(verdict, "after the case") && verdict.stage == "pass") {
      const ClearedError& e = verdict.cleared_errors.back();
      verdict.stage = "run";
      verdict.status = e.name;
      verdict.message = "the case left a CUDA error pending (cleared): " + e.string;
    }
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
