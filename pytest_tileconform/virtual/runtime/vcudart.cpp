// vcudart: a CUDA runtime for *judging* host-side decisions on a machine without a GPU.
//
// An executable built by nvcc is linked against this library instead of cudart
// (`nvcc --cudart=none ... libvcudart.a`). Device memory is host memory, copies are memcpy,
// kernels are never executed. Everything the real runtime and driver decide on the host is
// answered from a virtual device:
//
//   TILECONFORM_VIRTUAL_PROFILE  key=value file: the device's attributes (profiles.py writes it)
//   TILECONFORM_VIRTUAL_KERNELS  the chosen image and each kernel's resources (registers, static
//                                shared memory, launch bounds, ...) read from the executable's
//                                cubins at build time (resources.py writes it)
//   TILECONFORM_VIRTUAL_LOG      every call is appended here as one JSON object per line
//
// The answers follow the CUDA Runtime/Driver API documentation; where the documentation names
// no error code the code is the one a real H200 returned for the same call (see
// tests/test_virtual_runtime.py, which runs the same programs against both).
//
// Checks made:
//   cudaFuncSetAttribute(MaxDynamicSharedMemorySize, n): n + static smem <= opt-in limit
//   launches: block/grid dimensions, launch bounds and registers, dynamic smem against the
//             function's MaxDynamicSharedMemorySize, cluster size (portable / non-portable) and
//             grid divisibility, cooperative grid size (occupancy, from cuda_occupancy.h)
//   cuTensorMapEncodeTiled: every constraint documented for it in cuda.h
// A launch that passes is recorded, not executed, and returns cudaSuccess.

#include <cuda.h>
#include <cuda_occupancy.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace vcudart {

// ------------------------------------------------------------------------------------------
// JSON log

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One log record; fields are appended in order and written as one line.
class Record {
 public:
  explicit Record(const char* call) { add("call", std::string(call)); }
  Record& add(const char* key, const std::string& value) { return raw(key, quote(value)); }
  Record& add(const char* key, const char* value) { return raw(key, quote(value ? value : "")); }
  Record& add(const char* key, long long value) { return raw(key, std::to_string(value)); }
  Record& add(const char* key, bool value) { return raw(key, value ? "true" : "false"); }
  Record& add(const char* key, const dim3& d) {
    return raw(key, "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]");
  }
  Record& raw(const char* key, const std::string& json) {
    body_ += (body_.empty() ? "" : ",") + quote(key) + ":" + json;
    return *this;
  }
  const std::string& body() const { return body_; }

 private:
  std::string body_;
};

[[noreturn]] void fatal(const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "vcudart: ");
  std::vfprintf(stderr, fmt, args);
  std::fprintf(stderr, "\n");
  va_end(args);
  std::exit(3);
}

// ------------------------------------------------------------------------------------------
// The virtual device

const char* const kProfileKeys[] = {
    "name", "cc_major", "cc_minor", "sm_count", "total_global_mem", "total_constant_mem",
    "l2_cache_bytes", "max_smem_per_block", "max_smem_per_block_optin", "max_smem_per_sm",
    "reserved_smem_per_block", "regs_per_block", "regs_per_sm", "max_threads_per_block",
    "max_threads_per_sm", "max_blocks_per_sm", "max_block_dim_x", "max_block_dim_y",
    "max_block_dim_z", "max_grid_dim_x", "max_grid_dim_y", "max_grid_dim_z", "warp_size",
    "max_cluster_size_portable", "max_cluster_size_nonportable", "integrated",
    "driver_version",
};

struct Profile {
  std::string name;
  std::map<std::string, long long> values;

  long long operator[](const char* key) const {
    auto it = values.find(key);
    if (it == values.end()) fatal("profile has no '%s'", key);
    return it->second;
  }
  int i(const char* key) const { return static_cast<int>((*this)[key]); }
  int cc() const { return i("cc_major") * 10 + i("cc_minor"); }
};

Profile load_profile() {
  const char* path = std::getenv("TILECONFORM_VIRTUAL_PROFILE");
  if (path == nullptr || *path == '\0') fatal("TILECONFORM_VIRTUAL_PROFILE is not set");
  std::ifstream in(path);
  if (!in) fatal("cannot read profile %s", path);
  Profile p;
  std::string line;
  const std::set<std::string> known(std::begin(kProfileKeys), std::end(kProfileKeys));
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) fatal("profile %s: no '=' in '%s'", path, line.c_str());
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (!known.count(key)) fatal("profile %s: unknown key '%s'", path, key.c_str());
    if (key == "name") {
      p.name = value;
      continue;
    }
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') fatal("profile %s: '%s' is not an integer", path, line.c_str());
    p.values[key] = number;
  }
  for (const char* key : kProfileKeys) {
    if (std::string(key) != "name" && !p.values.count(key)) fatal("profile %s lacks '%s'", path, key);
  }
  return p;
}

// What the cubin says about one kernel (resources.py reads it from the executable).
struct Resources {
  bool known = false;  // false: the image is PTX, to be JIT-compiled: resources unknown
  int registers = 0;
  long long static_smem = 0;
  int max_threads = 0;  // __launch_bounds__ maxThreadsPerBlock; 0: none
  long long local_bytes = 0;
  long long const_bytes = 0;
  dim3 cluster{0, 0, 0};  // __cluster_dims__; 0: none
};

struct KernelTable {
  std::string image;  // "sm_90a", "ptx compute_90", or "none"
  std::map<std::string, Resources> kernels;
};

KernelTable load_kernels() {
  const char* path = std::getenv("TILECONFORM_VIRTUAL_KERNELS");
  if (path == nullptr || *path == '\0') fatal("TILECONFORM_VIRTUAL_KERNELS is not set");
  std::ifstream in(path);
  if (!in) fatal("cannot read kernel table %s", path);
  KernelTable table;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind) || kind[0] == '#') continue;
    if (kind == "image") {
      std::getline(words >> std::ws, table.image);
      continue;
    }
    if (kind != "kernel") fatal("kernel table %s: unknown line '%s'", path, line.c_str());
    std::string name, field;
    words >> name;
    Resources r;
    r.known = true;
    while (words >> field) {
      const auto eq = field.find('=');
      if (eq == std::string::npos) fatal("kernel table %s: bad field '%s'", path, field.c_str());
      const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
      if (key == "cluster") {
        if (std::sscanf(value.c_str(), "%u,%u,%u", &r.cluster.x, &r.cluster.y, &r.cluster.z) != 3) {
          fatal("kernel table %s: bad cluster '%s'", path, value.c_str());
        }
        continue;
      }
      const long long v = std::strtoll(value.c_str(), nullptr, 10);
      if (key == "registers") r.registers = static_cast<int>(v);
      else if (key == "static_smem") r.static_smem = v;
      else if (key == "max_threads") r.max_threads = static_cast<int>(v);
      else if (key == "local_bytes") r.local_bytes = v;
      else if (key == "const_bytes") r.const_bytes = v;
      else fatal("kernel table %s: unknown field '%s'", path, key.c_str());
    }
    table.kernels[name] = r;
  }
  if (table.image.empty()) fatal("kernel table %s has no 'image' line", path);
  return table;
}

struct Function {
  std::string name;  // mangled device name, from __cudaRegisterFunction
  bool resolved = false;
  bool has_image = true;
  bool listed = true;
  Resources res;
  // cudaFuncSetAttribute state
  int max_dynamic_smem = -1;  // -1: the default (48 KiB - static), computed on first use
  int carveout = -1;
  int non_portable_cluster = 0;
  int scheduling_policy = 0;
  dim3 required_cluster{0, 0, 0};
};

struct Pushed {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};

struct State {
  std::mutex mutex;
  bool loaded = false;
  Profile profile;
  KernelTable table;
  std::map<const void*, Function*> by_stub;
  std::set<const Function*> functions;
  std::map<uintptr_t, size_t> allocations;  // device pointer -> bytes
  size_t allocated = 0;
  std::set<const void*> streams, events;
  std::vector<Pushed> pushed;  // <<<>>> configurations, pushed before and popped in the stub
  long long launches = 0;
  long long seq = 0;
  std::string log_path;
};

State& state() {
  static State* s = new State;  // never destroyed: atexit handlers still call in
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;

void ensure_loaded(State& s) {
  if (s.loaded) return;
  s.profile = load_profile();
  s.table = load_kernels();
  if (const char* log = std::getenv("TILECONFORM_VIRTUAL_LOG")) s.log_path = log;
  s.loaded = true;
}

void write(State& s, const Record& r) {
  if (s.log_path.empty()) return;
  FILE* f = std::fopen(s.log_path.c_str(), "a");
  if (f == nullptr) return;
  std::fprintf(f, "{\"seq\":%lld,%s}\n", s.seq++, r.body().c_str());
  std::fclose(f);
}

const char* error_name(int code);

// Log the call, remember a failure for cudaGetLastError, and return the result.
cudaError_t finish(State& s, Record& r, cudaError_t result) {
  r.add("result", error_name(result));
  write(s, r);
  if (result != cudaSuccess) last_error = result;
  return result;
}

// ------------------------------------------------------------------------------------------
// Errors: names and strings as the real runtime spells them.

struct ErrorText {
  int code;
  const char* name;
  const char* text;
};

const ErrorText kErrors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"},
    {999, "cudaErrorUnknown", "unknown error"},
};

const char* error_name(int code) {
  for (const auto& e : kErrors) {
    if (e.code == code) return e.name;
  }
  return "cudaErrorUnknown";
}

const char* error_text(int code) {
  for (const auto& e : kErrors) {
    if (e.code == code) return e.text;
  }
  return "unrecognized error code";
}

// ------------------------------------------------------------------------------------------
// Functions

// Bind a registered function to its entry in the kernel table (on first use, as the driver
// loads modules lazily).
Function& resolve(State& s, Function& f) {
  if (f.resolved) return f;
  f.resolved = true;
  const std::string& image = s.table.image;
  if (image == "none") {
    f.has_image = false;
  } else if (image.rfind("ptx ", 0) == 0) {
    f.res = Resources{};  // JIT: unknown resources
  } else {
    auto it = s.table.kernels.find(f.name);
    f.listed = it != s.table.kernels.end();
    if (f.listed) f.res = it->second;
  }
  if (f.res.known && f.res.cluster.x != 0) f.required_cluster = f.res.cluster;
  return f;
}

Function* find_function(State& s, const void* func) {
  auto it = s.by_stub.find(func);
  Function* f = nullptr;
  if (it != s.by_stub.end()) {
    f = it->second;
  } else if (s.functions.count(static_cast<const Function*>(func))) {
    f = const_cast<Function*>(static_cast<const Function*>(func));  // a cudaKernel_t
  }
  return f ? &resolve(s, *f) : nullptr;
}

// The error any use of an unusable function gets.
cudaError_t usable(const Function* f) {
  if (f == nullptr) return cudaErrorInvalidDeviceFunction;
  if (!f->has_image) return cudaErrorNoKernelImageForDevice;
  if (!f->listed) return cudaErrorInvalidDeviceFunction;
  return cudaSuccess;
}

int max_dynamic_smem(const State& s, Function& f) {
  if (f.max_dynamic_smem < 0) {
    f.max_dynamic_smem = static_cast<int>(s.profile["max_smem_per_block"] - f.res.static_smem);
  }
  return f.max_dynamic_smem;
}

// Registers are allocated per warp, 256 at a time (cuda_occupancy.h,
// cudaOccRegAllocationGranularity); a block fits if all its warps fit the register file.
int register_limited_threads(const State& s, const Function& f) {
  if (!f.res.known || f.res.registers <= 0) return s.profile.i("max_threads_per_block");
  const int warp = s.profile.i("warp_size");
  const int per_warp = (f.res.registers * warp + 255) / 256 * 256;
  return s.profile.i("regs_per_block") / per_warp * warp;
}

int max_threads(const State& s, const Function& f) {
  int limit = std::min(s.profile.i("max_threads_per_block"), register_limited_threads(s, f));
  if (f.res.max_threads > 0) limit = std::min(limit, f.res.max_threads);
  return limit;
}

cudaFuncAttributes attributes_of(const State& s, Function& f) {
  cudaFuncAttributes a{};
  a.sharedSizeBytes = static_cast<size_t>(f.res.static_smem);
  a.constSizeBytes = static_cast<size_t>(f.res.const_bytes);
  a.localSizeBytes = static_cast<size_t>(f.res.local_bytes);
  a.maxThreadsPerBlock = max_threads(s, f);
  a.numRegs = f.res.registers;
  a.ptxVersion = s.profile.cc();
  a.binaryVersion = s.profile.cc();
  a.maxDynamicSharedSizeBytes = max_dynamic_smem(s, f);
  a.preferredShmemCarveout = f.carveout;
  a.requiredClusterWidth = static_cast<int>(f.required_cluster.x);
  a.requiredClusterHeight = static_cast<int>(f.required_cluster.y);
  a.requiredClusterDepth = static_cast<int>(f.required_cluster.z);
  a.clusterSchedulingPolicyPreference = f.scheduling_policy;
  a.nonPortableClusterSizeAllowed = f.non_portable_cluster;
  return a;
}

cudaDeviceProp properties(const State& s) {
  const Profile& p = s.profile;
  cudaDeviceProp prop{};
  std::snprintf(prop.name, sizeof(prop.name), "%s", p.name.c_str());
  prop.totalGlobalMem = static_cast<size_t>(p["total_global_mem"]);
  prop.sharedMemPerBlock = static_cast<size_t>(p["max_smem_per_block"]);
  prop.regsPerBlock = p.i("regs_per_block");
  prop.warpSize = p.i("warp_size");
  prop.memPitch = 2147483647;
  prop.maxThreadsPerBlock = p.i("max_threads_per_block");
  prop.maxThreadsDim[0] = p.i("max_block_dim_x");
  prop.maxThreadsDim[1] = p.i("max_block_dim_y");
  prop.maxThreadsDim[2] = p.i("max_block_dim_z");
  prop.maxGridSize[0] = p.i("max_grid_dim_x");
  prop.maxGridSize[1] = p.i("max_grid_dim_y");
  prop.maxGridSize[2] = p.i("max_grid_dim_z");
  prop.totalConstMem = static_cast<size_t>(p["total_constant_mem"]);
  prop.major = p.i("cc_major");
  prop.minor = p.i("cc_minor");
  prop.textureAlignment = 512;
  prop.texturePitchAlignment = 32;
  prop.multiProcessorCount = p.i("sm_count");
  prop.integrated = p.i("integrated");
  prop.canMapHostMemory = 1;
  prop.concurrentKernels = 1;
  prop.unifiedAddressing = 1;
  prop.l2CacheSize = p.i("l2_cache_bytes");
  prop.maxThreadsPerMultiProcessor = p.i("max_threads_per_sm");
  prop.streamPrioritiesSupported = 1;
  prop.globalL1CacheSupported = 1;
  prop.localL1CacheSupported = 1;
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(p["max_smem_per_sm"]);
  prop.regsPerMultiprocessor = p.i("regs_per_sm");
  prop.managedMemory = 1;
  prop.computePreemptionSupported = 1;
  prop.cooperativeLaunch = 1;
  prop.sharedMemPerBlockOptin = static_cast<size_t>(p["max_smem_per_block_optin"]);
  prop.maxBlocksPerMultiProcessor = p.i("max_blocks_per_sm");
  prop.reservedSharedMemPerBlock = static_cast<size_t>(p["reserved_smem_per_block"]);
  prop.memoryPoolsSupported = 1;
  prop.clusterLaunch = p.cc() >= 90 ? 1 : 0;
  return prop;
}

// Blocks of `f` that fit on one SM, from NVIDIA's occupancy calculator (cuda_occupancy.h).
int occupancy(const State& s, Function& f, int block_threads, size_t dynamic_smem) {
  const cudaDeviceProp prop = properties(s);
  const cudaFuncAttributes attr = attributes_of(s, f);
  cudaOccDeviceProp occ_prop(prop);
  cudaOccFuncAttributes occ_attr(attr);
  cudaOccDeviceState occ_state;
  cudaOccResult result{};
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &occ_prop, &occ_attr, &occ_state, block_threads,
                                              dynamic_smem) != CUDA_OCC_SUCCESS) {
    return 0;
  }
  return result.activeBlocksPerMultiprocessor;
}

// ------------------------------------------------------------------------------------------
// Launch checks

struct LaunchConfig {
  dim3 grid, block;
  size_t smem = 0;
  dim3 cluster{0, 0, 0};  // from cudaLaunchAttributeClusterDimension; 0: none
  bool cooperative = false;
  bool pdl = false;
};

unsigned long long volume(const dim3& d) {
  return static_cast<unsigned long long>(d.x) * d.y * d.z;
}

cudaError_t check_launch(State& s, Function* f, const LaunchConfig& c, Record& r) {
  const Profile& p = s.profile;
  r.add("grid", c.grid).add("block", c.block).add("smem", static_cast<long long>(c.smem));
  if (volume(c.cluster) > 0) r.add("cluster", c.cluster);
  if (c.cooperative) r.add("cooperative", true);
  if (c.pdl) r.add("programmatic_stream_serialization", true);
  if (f != nullptr) r.add("kernel", f->name);
  if (const cudaError_t e = usable(f); e != cudaSuccess) {
    return r.add("reason", f == nullptr ? "not a registered kernel" : !f->has_image
                     ? "no image in the executable runs on this device" : "kernel missing from the table"),
           e;
  }
  // CUDA 13 launches go through the driver (cuLaunchKernel[Ex]): a bad shape is
  // cudaErrorInvalidValue on every launch path, not the older cudaErrorInvalidConfiguration.
  auto reason = [&r](const std::string& why) -> Record& { return r.add("reason", why); };
  if (volume(c.block) == 0 || volume(c.grid) == 0) {
    reason("zero block or grid dimension");
    return cudaErrorInvalidValue;
  }
  const unsigned long long threads = volume(c.block);
  if (c.block.x > static_cast<unsigned>(p.i("max_block_dim_x")) ||
      c.block.y > static_cast<unsigned>(p.i("max_block_dim_y")) ||
      c.block.z > static_cast<unsigned>(p.i("max_block_dim_z")) ||
      threads > static_cast<unsigned long long>(p.i("max_threads_per_block"))) {
    reason("block exceeds the device's block dimensions / max threads per block")
        .add("limit", static_cast<long long>(p.i("max_threads_per_block")));
    return cudaErrorInvalidValue;
  }
  if (c.grid.x > static_cast<unsigned>(p.i("max_grid_dim_x")) ||
      c.grid.y > static_cast<unsigned>(p.i("max_grid_dim_y")) ||
      c.grid.z > static_cast<unsigned>(p.i("max_grid_dim_z"))) {
    reason("grid exceeds the device's grid dimensions");
    return cudaErrorInvalidValue;
  }
  if (!f->res.known) r.add("resources", "unknown (PTX JIT)");
  if (f->res.max_threads > 0 && threads > static_cast<unsigned long long>(f->res.max_threads)) {
    reason("block exceeds the kernel's __launch_bounds__").add("limit", static_cast<long long>(f->res.max_threads));
    return cudaErrorInvalidValue;
  }
  const int register_limit = register_limited_threads(s, *f);
  if (threads > static_cast<unsigned long long>(register_limit)) {
    reason("registers per thread x threads exceed the registers per block")
        .add("limit", static_cast<long long>(register_limit))
        .add("registers", static_cast<long long>(f->res.registers));
    return cudaErrorLaunchOutOfResources;
  }
  const long long dyn_limit = max_dynamic_smem(s, *f);
  r.add("static_smem", f->res.static_smem).add("max_dynamic_smem", dyn_limit);
  if (static_cast<long long>(c.smem) > dyn_limit) {
    reason("dynamic shared memory exceeds the kernel's MaxDynamicSharedMemorySize").add("limit", dyn_limit);
    return cudaErrorInvalidValue;
  }
  const long long optin = p["max_smem_per_block_optin"];
  if (f->res.static_smem + static_cast<long long>(c.smem) > optin) {
    reason("static + dynamic shared memory exceed the opt-in limit").add("limit", optin);
    return cudaErrorInvalidValue;
  }
  dim3 cluster = volume(f->required_cluster) > 0 ? f->required_cluster : c.cluster;
  if (volume(c.cluster) > 0 && volume(f->required_cluster) > 0 &&
      (c.cluster.x != f->required_cluster.x || c.cluster.y != f->required_cluster.y ||
       c.cluster.z != f->required_cluster.z)) {
    reason("cluster dimension differs from the kernel's compile-time __cluster_dims__");
    return cudaErrorInvalidClusterSize;
  }
  if (volume(cluster) > 0) {
    if (p.cc() < 90) {
      reason("thread block clusters need compute capability 9.0");
      return cudaErrorNotSupported;
    }
    const long long limit = f->non_portable_cluster ? p["max_cluster_size_nonportable"]
                                                    : p["max_cluster_size_portable"];
    if (static_cast<long long>(volume(cluster)) > limit) {
      reason(f->non_portable_cluster ? "cluster exceeds the device's non-portable cluster size"
                                     : "cluster exceeds the portable cluster size "
                                       "(cudaFuncAttributeNonPortableClusterSizeAllowed not set)")
          .add("limit", limit);
      return cudaErrorInvalidClusterSize;
    }
    if (c.grid.x % cluster.x || c.grid.y % cluster.y || c.grid.z % cluster.z) {
      reason("grid is not a multiple of the cluster dimension");
      return cudaErrorInvalidClusterSize;
    }
  }
  if (c.cooperative) {
    const long long resident =
        static_cast<long long>(occupancy(s, *f, static_cast<int>(threads), c.smem)) * p["sm_count"];
    if (static_cast<long long>(volume(c.grid)) > resident) {
      reason("cooperative grid exceeds the blocks that can be co-resident").add("limit", resident);
      return cudaErrorCooperativeLaunchTooLarge;
    }
  }
  ++s.launches;
  r.add("recorded", true);
  return cudaSuccess;
}

cudaError_t launch(const char* call, Function* f, const LaunchConfig& c) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ensure_loaded(s);
  Record r(call);
  return finish(s, r, check_launch(s, f, c, r));
}

cudaError_t launch_ex(const char* call, const cudaLaunchConfig_t* config, const void* func) {
  State& s = state();
  LaunchConfig c;
  Function* f = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_loaded(s);
    if (config == nullptr) {
      Record r(call);
      return finish(s, r.add("reason", "config is NULL"), cudaErrorInvalidValue);
    }
    f = find_function(s, func);
  }
  c.grid = config->gridDim;
  c.block = config->blockDim;
  c.smem = config->dynamicSmemBytes;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case cudaLaunchAttributeClusterDimension:
        c.cluster = dim3(a.val.clusterDim.x, a.val.clusterDim.y, a.val.clusterDim.z);
        break;
      case cudaLaunchAttributeCooperative:
        c.cooperative = a.val.cooperative != 0;
        break;
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        c.pdl = a.val.programmaticStreamSerializationAllowed != 0;
        break;
      default:
        break;
    }
  }
  return launch(call, f, c);
}

// ------------------------------------------------------------------------------------------
// cuTensorMapEncodeTiled, checked against the requirements listed for it in cuda.h.

// Bits one element occupies in global memory; the packed types are 16 values in 8 or 16 bytes.
int tensor_map_element_bits(int type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: return 8;
    default: return 0;
  }
}

bool is_float_type(int type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return true;
    default: return false;
  }
}

std::string list(const void* values, unsigned n, bool wide) {
  std::string out = "[";
  for (unsigned i = 0; i < n; ++i) {
    const unsigned long long v = wide ? static_cast<const cuuint64_t*>(values)[i]
                                      : static_cast<const cuuint32_t*>(values)[i];
    out += (i ? "," : "") + std::to_string(v);
  }
  return out + "]";
}

// The first violated requirement, or "" if none.
std::string tensor_map_violation(const CUtensorMap* map, int type, cuuint32_t rank, const void* address,
                                 const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                 const cuuint32_t* elem_strides, int interleave, int swizzle, int l2, int oob) {
  const bool packed16 = type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
  const int bits = tensor_map_element_bits(type);
  const auto addr = reinterpret_cast<uintptr_t>(address);
  if (map == nullptr || reinterpret_cast<uintptr_t>(map) % 64) return "tensorMap address must be aligned to 64 bytes";
  if (bits == 0) return "tensorDataType " + std::to_string(type) + " is not a CUtensorMapDataType";
  if (interleave < CU_TENSOR_MAP_INTERLEAVE_NONE || interleave > CU_TENSOR_MAP_INTERLEAVE_32B) return "interleave is not a CUtensorMapInterleave";
  if (swizzle < CU_TENSOR_MAP_SWIZZLE_NONE || swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) return "swizzle is not a CUtensorMapSwizzle";
  if (l2 < CU_TENSOR_MAP_L2_PROMOTION_NONE || l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return "l2Promotion is not a CUtensorMapL2promotion";
  if (oob < CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE || oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) return "oobFill is not a CUtensorMapFloatOOBfill";
  if (rank == 0 || rank > 5) return "tensorRank must be in [1, 5]";
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) return "tensorRank must be >= 3 with interleave";
  if (address == nullptr || dims == nullptr || box == nullptr || elem_strides == nullptr || (rank > 1 && strides == nullptr)) {
    return "NULL globalAddress, globalDim, globalStrides, boxDim or elementStrides";
  }
  if (addr % 16) return "globalAddress must be 16-byte aligned";
  if ((interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed16) && addr % 32) return "globalAddress must be 32-byte aligned (interleave 32B or 16U4/16U6_ALIGN16B)";
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return "globalDim[" + std::to_string(i) + "] must be in [1, 2^32]";
  }
  if (packed16 && dims[0] % 128) return "globalDim[0] must be a multiple of 128 for 16U4/16U6_ALIGN16B";
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2) return "globalDim[0] must be a multiple of 2 for 16U4_ALIGN8B";
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    const std::string which = "globalStrides[" + std::to_string(i) + "]";
    if (strides[i] % 16) return which + " must be a multiple of 16";
    if (strides[i] >= (1ull << 40)) return which + " must be < 2^40";
    if ((interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed16) && strides[i] % 32) return which + " must be a multiple of 32 (interleave 32B or 16U4/16U6_ALIGN16B)";
  }
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256) return "boxDim[" + std::to_string(i) + "] must be in [1, 256]";
  }
  const unsigned long long inner_bits = static_cast<unsigned long long>(box[0]) * bits;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner_bits % (16 * 8)) return "boxDim[0] * element size must be a multiple of 16 bytes";
  if (packed16 && box[0] != 128) return "boxDim[0] must be 128 for 16U4/16U6_ALIGN16B";
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (elem_strides[i] == 0 || elem_strides[i] > 8) return "elementStrides[" + std::to_string(i) + "] must be in [1, 8]";
  }
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) return "interleave 32B requires swizzle 32B";
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    const unsigned long long span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : 128;
    if (inner_bits > span * 8) return "inner box dimension (boxDim[0] * element size) exceeds the swizzle span of " + std::to_string(span) + " bytes";
  }
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return "16U6_ALIGN16B requires interleave NONE";
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
      !(swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
        swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B || swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)) {
    return "16U6_ALIGN16B supports swizzle NONE, 128B, 128B_ATOM_32B, 128B_ATOM_64B only";
  }
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B &&
      !(swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
        swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)) {
    return "16U4_ALIGN16B supports swizzle NONE, 128B, 128B_ATOM_32B only";
  }
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float_type(type)) return "NaN OOB fill needs a floating-point data type";
  return "";
}

CUresult CUDAAPI encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                              const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                              const cuuint32_t* elem_strides, CUtensorMapInterleave interleave,
                              CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ensure_loaded(s);
  Record r("cuTensorMapEncodeTiled");
  const std::string why = tensor_map_violation(map, type, rank, address, dims, strides, box, elem_strides,
                                               interleave, swizzle, l2, oob);
  r.add("data_type", static_cast<long long>(type)).add("rank", static_cast<long long>(rank));
  r.add("address_mod_64", static_cast<long long>(reinterpret_cast<uintptr_t>(address) % 64));
  if (rank >= 1 && rank <= 5 && dims && box && elem_strides) {
    r.raw("global_dim", list(dims, rank, true)).raw("box_dim", list(box, rank, false));
    r.raw("element_strides", list(elem_strides, rank, false));
    if (strides) r.raw("global_strides", list(strides, rank - 1, true));
  }
  r.add("interleave", static_cast<long long>(interleave)).add("swizzle", static_cast<long long>(swizzle));
  const CUresult result = why.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (!why.empty()) r.add("reason", why);
  if (result == CUDA_SUCCESS) std::memset(map, 0, sizeof(*map));
  r.add("result", result == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_INVALID_VALUE");
  write(s, r);
  return result;
}

CUresult CUDAAPI driver_get_error_string(CUresult error, const char** text) {
  *text = error_text(static_cast<int>(error));
  return CUDA_SUCCESS;
}

// ------------------------------------------------------------------------------------------
// Device attributes, by cudaDeviceAttr

long long attribute(const State& s, int attr, bool* known) {
  const Profile& p = s.profile;
  *known = true;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return p["max_threads_per_block"];
    case cudaDevAttrMaxBlockDimX: return p["max_block_dim_x"];
    case cudaDevAttrMaxBlockDimY: return p["max_block_dim_y"];
    case cudaDevAttrMaxBlockDimZ: return p["max_block_dim_z"];
    case cudaDevAttrMaxGridDimX: return p["max_grid_dim_x"];
    case cudaDevAttrMaxGridDimY: return p["max_grid_dim_y"];
    case cudaDevAttrMaxGridDimZ: return p["max_grid_dim_z"];
    case cudaDevAttrMaxSharedMemoryPerBlock: return p["max_smem_per_block"];
    case cudaDevAttrTotalConstantMemory: return p["total_constant_mem"];
    case cudaDevAttrWarpSize: return p["warp_size"];
    case cudaDevAttrMaxRegistersPerBlock: return p["regs_per_block"];
    case cudaDevAttrMultiProcessorCount: return p["sm_count"];
    case cudaDevAttrIntegrated: return p["integrated"];
    case cudaDevAttrL2CacheSize: return p["l2_cache_bytes"];
    case cudaDevAttrMaxThreadsPerMultiProcessor: return p["max_threads_per_sm"];
    case cudaDevAttrComputeCapabilityMajor: return p["cc_major"];
    case cudaDevAttrComputeCapabilityMinor: return p["cc_minor"];
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return p["max_smem_per_sm"];
    case cudaDevAttrMaxRegistersPerMultiprocessor: return p["regs_per_sm"];
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return p["max_smem_per_block_optin"];
    case cudaDevAttrMaxBlocksPerMultiprocessor: return p["max_blocks_per_sm"];
    case cudaDevAttrReservedSharedMemoryPerBlock: return p["reserved_smem_per_block"];
    case cudaDevAttrClusterLaunch: return p.cc() >= 90 ? 1 : 0;
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrCooperativeLaunch:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrStreamPrioritiesSupported:
    case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported: return 1;
    case cudaDevAttrComputeMode: return cudaComputeModeDefault;
    default: *known = false; return 0;
  }
}

}  // namespace vcudart

using namespace vcudart;

// ==========================================================================================
// Public runtime API

// A new stream or event: an opaque heap address, remembered so that destroying it can be checked.
template <typename Handle>
cudaError_t new_handle(State& s, Record& r, std::set<const void*>& handles, Handle* out) {
  if (out == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *out = reinterpret_cast<Handle>(new char);
  handles.insert(*out);
  return finish(s, r, cudaSuccess);
}

#define VCUDART_BEGIN(call)                     \
  State& s = state();                           \
  std::lock_guard<std::mutex> lock_(s.mutex);   \
  ensure_loaded(s);                             \
  Record r(call)

extern "C" {

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  VCUDART_BEGIN("cudaGetDeviceCount");
  if (count == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *count = 1;
  return finish(s, r.add("count", 1LL), cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  VCUDART_BEGIN("cudaGetDevice");
  if (device == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *device = 0;
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  VCUDART_BEGIN("cudaSetDevice");
  return finish(s, r.add("device", static_cast<long long>(device)), device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  VCUDART_BEGIN("cudaGetDeviceProperties");
  if (prop == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (device != 0) return finish(s, r, cudaErrorInvalidDevice);
  *prop = properties(s);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  VCUDART_BEGIN("cudaDeviceGetAttribute");
  r.add("attr", static_cast<long long>(attr));
  if (value == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (device != 0) return finish(s, r, cudaErrorInvalidDevice);
  bool known = false;
  const long long v = attribute(s, attr, &known);
  if (!known) return finish(s, r.add("reason", "attribute not modelled by the virtual device"), cudaErrorInvalidValue);
  *value = static_cast<int>(v);
  return finish(s, r.add("value", v), cudaSuccess);
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int* version) {
  VCUDART_BEGIN("cudaDriverGetVersion");
  if (version == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *version = s.profile.i("driver_version");
  return finish(s, r.add("value", static_cast<long long>(*version)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* version) {
  VCUDART_BEGIN("cudaRuntimeGetVersion");
  if (version == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  VCUDART_BEGIN("cudaDeviceSynchronize");
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  VCUDART_BEGIN("cudaGetLastError");
  r.add("result", error_name(e));
  write(s, r);
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  const cudaError_t e = last_error;
  VCUDART_BEGIN("cudaPeekAtLastError");
  r.add("result", error_name(e));
  write(s, r);
  return e;
}

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) { return error_name(error); }

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) { return error_text(error); }

// -- memory --------------------------------------------------------------------------------

cudaError_t CUDARTAPI cudaMalloc(void** ptr, size_t size) {
  VCUDART_BEGIN("cudaMalloc");
  r.add("bytes", static_cast<long long>(size));
  if (ptr == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (size == 0) {
    *ptr = nullptr;
    return finish(s, r, cudaSuccess);
  }
  if (s.allocated + size > static_cast<size_t>(s.profile["total_global_mem"])) {
    *ptr = nullptr;
    return finish(s, r.add("reason", "exceeds the device's global memory"), cudaErrorMemoryAllocation);
  }
  void* p = nullptr;
  if (posix_memalign(&p, 256, size) != 0) {  // cudaMalloc aligns to at least 256 bytes
    *ptr = nullptr;
    return finish(s, r.add("reason", "host allocation failed"), cudaErrorMemoryAllocation);
  }
  s.allocations[reinterpret_cast<uintptr_t>(p)] = size;
  s.allocated += size;
  *ptr = p;
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaFree(void* ptr) {
  VCUDART_BEGIN("cudaFree");
  if (ptr == nullptr) return finish(s, r, cudaSuccess);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end()) return finish(s, r.add("reason", "not a device allocation"), cudaErrorInvalidValue);
  s.allocated -= it->second;
  s.allocations.erase(it);
  std::free(ptr);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  VCUDART_BEGIN("cudaMemcpy");
  r.add("bytes", static_cast<long long>(count)).add("kind", static_cast<long long>(kind));
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return finish(s, r, cudaErrorInvalidMemcpyDirection);
  if (count > 0) std::memmove(dst, src, count);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t) {
  VCUDART_BEGIN("cudaMemcpyAsync");
  r.add("bytes", static_cast<long long>(count)).add("kind", static_cast<long long>(kind));
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return finish(s, r, cudaErrorInvalidMemcpyDirection);
  if (count > 0) std::memmove(dst, src, count);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemset(void* dst, int value, size_t count) {
  VCUDART_BEGIN("cudaMemset");
  if (count > 0) std::memset(dst, value, count);
  return finish(s, r.add("bytes", static_cast<long long>(count)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t) {
  VCUDART_BEGIN("cudaMemsetAsync");
  if (count > 0) std::memset(dst, value, count);
  return finish(s, r.add("bytes", static_cast<long long>(count)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  VCUDART_BEGIN("cudaPointerGetAttributes");
  if (attributes == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *attributes = cudaPointerAttributes{};
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.allocations.upper_bound(p);
  const bool device = it != s.allocations.begin() && (--it, p < it->first + it->second);
  attributes->type = device ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  attributes->device = device ? 0 : -2;
  attributes->devicePointer = device ? const_cast<void*>(ptr) : nullptr;
  return finish(s, r.add("device_memory", device), cudaSuccess);
}

// -- streams and events --------------------------------------------------------------------

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* stream) {
  VCUDART_BEGIN("cudaStreamCreate");
  return new_handle(s, r, s.streams, stream);
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  VCUDART_BEGIN("cudaStreamCreateWithFlags");
  return new_handle(s, r, s.streams, stream);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  VCUDART_BEGIN("cudaStreamDestroy");
  if (!s.streams.erase(stream)) return finish(s, r, cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(stream);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) {
  VCUDART_BEGIN("cudaStreamSynchronize");
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  VCUDART_BEGIN("cudaStreamIsCapturing");
  if (status == nullptr) return finish(s, r, cudaErrorInvalidValue);
  *status = cudaStreamCaptureStatusNone;
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  VCUDART_BEGIN("cudaEventCreate");
  return new_handle(s, r, s.events, event);
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  VCUDART_BEGIN("cudaEventCreateWithFlags");
  return new_handle(s, r, s.events, event);
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  VCUDART_BEGIN("cudaEventDestroy");
  if (!s.events.erase(event)) return finish(s, r, cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(event);
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  VCUDART_BEGIN("cudaEventRecord");
  return finish(s, r, s.events.count(event) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  VCUDART_BEGIN("cudaEventSynchronize");
  return finish(s, r, s.events.count(event) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

// No kernel ran, so no time passed: 0 ms, and the log says why.
cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  VCUDART_BEGIN("cudaEventElapsedTime");
  if (ms == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (!s.events.count(start) || !s.events.count(end)) return finish(s, r, cudaErrorInvalidResourceHandle);
  *ms = 0.0f;
  return finish(s, r.add("note", "virtual device: kernels are not executed"), cudaSuccess);
}

// -- functions -----------------------------------------------------------------------------

cudaError_t CUDARTAPI cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  VCUDART_BEGIN("cudaFuncGetAttributes");
  Function* f = find_function(s, func);
  if (f) r.add("kernel", f->name);
  if (attr == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (const cudaError_t e = usable(f); e != cudaSuccess) return finish(s, r, e);
  *attr = attributes_of(s, *f);
  r.add("registers", static_cast<long long>(attr->numRegs)).add("static_smem", static_cast<long long>(attr->sharedSizeBytes));
  r.add("max_threads", static_cast<long long>(attr->maxThreadsPerBlock));
  return finish(s, r.add("max_dynamic_smem", static_cast<long long>(attr->maxDynamicSharedSizeBytes)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  VCUDART_BEGIN("cudaFuncSetAttribute");
  Function* f = find_function(s, func);
  r.add("attr", static_cast<long long>(attr)).add("value", static_cast<long long>(value));
  if (f) r.add("kernel", f->name);
  if (const cudaError_t e = usable(f); e != cudaSuccess) return finish(s, r, e);
  switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize: {
      const long long optin = s.profile["max_smem_per_block_optin"];
      const long long limit = optin - f->res.static_smem;
      r.add("attr_name", "MaxDynamicSharedMemorySize").add("static_smem", f->res.static_smem);
      r.add("limit", limit).add("optin", optin);
      if (value < 0 || value > limit) {
        return finish(s, r.add("reason", "dynamic + static shared memory exceed the device's opt-in limit per block"),
                      cudaErrorInvalidValue);
      }
      f->max_dynamic_smem = value;
      return finish(s, r, cudaSuccess);
    }
    case cudaFuncAttributePreferredSharedMemoryCarveout:
      if (value < -1 || value > 100) return finish(s, r, cudaErrorInvalidValue);
      f->carveout = value;
      return finish(s, r, cudaSuccess);
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
      if (value != 0 && value != 1) return finish(s, r, cudaErrorInvalidValue);
      f->non_portable_cluster = value;
      return finish(s, r.add("attr_name", "NonPortableClusterSizeAllowed"), cudaSuccess);
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
      if (value < cudaClusterSchedulingPolicyDefault || value > cudaClusterSchedulingPolicyLoadBalancing) {
        return finish(s, r, cudaErrorInvalidValue);
      }
      f->scheduling_policy = value;
      return finish(s, r, cudaSuccess);
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth: {
      if (f->res.cluster.x != 0) {
        return finish(s, r.add("reason", "cluster dimension fixed at compile time"), cudaErrorInvalidValue);
      }
      if (value < 0) return finish(s, r, cudaErrorInvalidValue);
      unsigned& slot = attr == cudaFuncAttributeRequiredClusterWidth    ? f->required_cluster.x
                       : attr == cudaFuncAttributeRequiredClusterHeight ? f->required_cluster.y
                                                                        : f->required_cluster.z;
      slot = static_cast<unsigned>(value);
      return finish(s, r, cudaSuccess);
    }
    default:
      return finish(s, r.add("reason", "attribute not modelled by the virtual device"), cudaErrorInvalidValue);
  }
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                                   size_t dynamic_smem) {
  VCUDART_BEGIN("cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  Function* f = find_function(s, func);
  if (blocks == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (const cudaError_t e = usable(f); e != cudaSuccess) return finish(s, r, e);
  *blocks = occupancy(s, *f, block_size, dynamic_smem);
  r.add("kernel", f->name).add("block_size", static_cast<long long>(block_size));
  return finish(s, r.add("blocks", static_cast<long long>(*blocks)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func,
                                                                            int block_size, size_t dynamic_smem,
                                                                            unsigned int) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, func, block_size, dynamic_smem);
}

// Clusters that fit at once: as many whole clusters as the blocks that fit per SM allow,
// assuming a cluster's blocks may spread over any SMs (a GPC's SM count is not modelled).
cudaError_t CUDARTAPI cudaOccupancyMaxActiveClusters(int* clusters, const void* func, const cudaLaunchConfig_t* config) {
  VCUDART_BEGIN("cudaOccupancyMaxActiveClusters");
  Function* f = find_function(s, func);
  if (clusters == nullptr || config == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (const cudaError_t e = usable(f); e != cudaSuccess) return finish(s, r, e);
  dim3 cluster = f->required_cluster;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& c = config->attrs[i].val.clusterDim;
      cluster = dim3(c.x, c.y, c.z);
    }
  }
  const long long size = static_cast<long long>(volume(cluster));
  r.add("kernel", f->name).add("cluster", cluster);
  if (size == 0) return finish(s, r.add("reason", "no cluster dimension given"), cudaErrorInvalidValue);
  const long long limit = f->non_portable_cluster ? s.profile["max_cluster_size_nonportable"]
                                                  : s.profile["max_cluster_size_portable"];
  if (size > limit) return finish(s, r.add("limit", limit), cudaErrorInvalidClusterSize);
  const long long per_sm = occupancy(s, *f, static_cast<int>(volume(config->blockDim)), config->dynamicSmemBytes);
  *clusters = static_cast<int>(per_sm * s.profile["sm_count"] / size);
  return finish(s, r.add("clusters", static_cast<long long>(*clusters)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void**, size_t smem, cudaStream_t) {
  Function* f;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_loaded(s);
    f = find_function(s, func);
  }
  LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.smem = smem;
  return launch("cudaLaunchKernel", f, c);
}

cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void**) {
  return launch_ex("cudaLaunchKernelExC", config, func);
}

cudaError_t CUDARTAPI cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void**, size_t smem,
                                                  cudaStream_t) {
  Function* f;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_loaded(s);
    f = find_function(s, func);
  }
  LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.smem = smem;
  c.cooperative = true;
  return launch("cudaLaunchCooperativeKernel", f, c);
}

// -- driver entry points -------------------------------------------------------------------

static cudaError_t entry_point(const char* call, const char* symbol, void** fn, unsigned long long flags,
                               cudaDriverEntryPointQueryResult* status, long long version) {
  VCUDART_BEGIN(call);
  r.add("symbol", symbol).add("version", version).add("flags", static_cast<long long>(flags));
  if (symbol == nullptr || fn == nullptr) return finish(s, r, cudaErrorInvalidValue);
  const std::string name = symbol;
  *fn = name == "cuTensorMapEncodeTiled" ? reinterpret_cast<void*>(&encode_tiled)
        : name == "cuGetErrorString"     ? reinterpret_cast<void*>(&driver_get_error_string)
                                         : nullptr;
  if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  if (*fn == nullptr) r.add("reason", "driver symbol not modelled by the virtual device");
  return finish(s, r, cudaSuccess);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                              cudaDriverEntryPointQueryResult* status) {
  return entry_point("cudaGetDriverEntryPoint", symbol, fn, flags, status, -1);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                                       unsigned long long flags,
                                                       cudaDriverEntryPointQueryResult* status) {
  return entry_point("cudaGetDriverEntryPointByVersion", symbol, fn, flags, status, version);
}

// ==========================================================================================
// What nvcc-generated code calls: fat binary and kernel registration, <<<>>> launches.

void** CUDARTAPI __cudaRegisterFatBinary(void* fat_cubin) {
  // Called from static constructors, before main(): record only, load the profile lazily.
  return new void*(fat_cubin);
}

void CUDARTAPI __cudaRegisterFatBinaryEnd(void**) {}

void CUDARTAPI __cudaUnregisterFatBinary(void** handle) { delete handle; }

void CUDARTAPI __cudaRegisterFunction(void**, const char* host_fun, char*, const char* device_name, int, uint3*,
                                      uint3*, dim3*, dim3*, int*) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto* f = new Function;
  f->name = device_name;
  s.by_stub[host_fun] = f;
  s.functions.insert(f);
}

void CUDARTAPI __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}

void CUDARTAPI __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}

char CUDARTAPI __cudaInitModule(void**) { return 1; }

cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.by_stub.find(host_fun);
  if (it == s.by_stub.end()) return cudaErrorInvalidDeviceFunction;
  *kernel = reinterpret_cast<cudaKernel_t>(it->second);
  return cudaSuccess;
}

unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, struct CUstream_st* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.pushed.push_back(Pushed{grid, block, smem, stream});
  return 0;
}

cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem, void* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.pushed.empty()) return cudaErrorInvalidConfiguration;
  const Pushed top = s.pushed.back();
  s.pushed.pop_back();
  *grid = top.grid;
  *block = top.block;
  *smem = top.smem;
  *static_cast<cudaStream_t*>(stream) = top.stream;
  return cudaSuccess;
}

cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t smem,
                                         cudaStream_t) {
  Function* f;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_loaded(s);
    f = find_function(s, kernel);
  }
  LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.smem = smem;
  return launch("<<<>>>", f, c);
}

}  // extern "C"
