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
// The answers are held, call for call, to the real driver's: virtual/conformance/probe.cu asks
// every decision below of an H200 (the corpus, driver-corpus-h200.jsonl.gz) and of this runtime
// on the sm90 profile (tests/test_driver_corpus.py). Each refusal quotes the header sentence it
// comes from or says "corpus"; where the two disagree, the driver's answer is the one kept.
//
// Checks made:
//   cudaFuncSetAttribute(MaxDynamicSharedMemorySize, n): n + static smem <= opt-in limit
//   launches, in the driver's order: block/grid dimensions, launch bounds, cluster shape
//             (compile-time or required dimensions, grid divisibility), portable cluster size,
//             cooperative grid size (clusters placed within GPCs), dynamic and opt-in shared
//             memory, registers, non-portable cluster size
//   occupancy: cuda_occupancy.h with the function's carveout, as the corpus shows; clusters
//             as the driver places them, within GPCs (the profile's gpc_sms)
//   cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col: cuda.h's requirements the driver enforces,
//             and the ones it enforces that cuda.h does not state (the corpus)
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
    "driver_version", "tma_packed_types", "tma_swizzle_atom", "gpc_sms", "cluster_blocks_per_sm",
};

struct Profile {
  std::string name;
  std::map<std::string, long long> values;
  std::vector<long long> gpc_sms;  // SMs of each GPC; empty: unknown

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
    if (key == "gpc_sms") {  // comma-separated; empty: the layout is unknown
      std::stringstream items(value);
      for (std::string item; std::getline(items, item, ',');) {
        char* end = nullptr;
        const long long n = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n <= 0) fatal("profile %s: bad GPC SM count in '%s'", path, line.c_str());
        p.gpc_sms.push_back(n);
      }
      continue;
    }
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') fatal("profile %s: '%s' is not an integer", path, line.c_str());
    p.values[key] = number;
  }
  for (const char* key : kProfileKeys) {
    const std::string k = key;
    if (k != "name" && k != "gpc_sms" && !p.values.count(key)) fatal("profile %s lacks '%s'", path, key);
  }
  if (p.gpc_sms.empty()) p.gpc_sms.push_back(p.values["sm_count"]);  // unknown: one GPC of every SM
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

// Registers are allocated per warp, 256 at a time, from one of the SM's 4 sub-partitions'
// register files (cuda_occupancy.h: cudaOccRegAllocationGranularity,
// cudaOccSubPartitionsPerMultiprocessor); a block fits if all its warps fit. Corpus: 96
// registers a thread allow 640 threads (5 warps in each quarter), not 672.
int register_limited_threads(const State& s, const Function& f) {
  if (!f.res.known || f.res.registers <= 0) return s.profile.i("max_threads_per_block");
  const int warp = s.profile.i("warp_size");
  const int per_warp = (f.res.registers * warp + 255) / 256 * 256;
  return s.profile.i("regs_per_block") / 4 / per_warp * 4 * warp;
}

int max_threads(const State& s, const Function& f) {
  int limit = std::min(s.profile.i("max_threads_per_block"), register_limited_threads(s, f));
  if (f.res.max_threads > 0) limit = std::min(limit, f.res.max_threads);
  return limit;
}

cudaFuncAttributes attributes_of(const State& s, Function& f) {
  cudaFuncAttributes a{};
  a.sharedSizeBytes = static_cast<size_t>(f.res.static_smem);
  // The driver answers the user __constant__ memory the function uses (corpus: 0 for kernels
  // that use none); the kernel table's const_bytes is constant bank 0 (parameters and driver
  // constants), which it does not count. User constant memory is not in the table: 0.
  a.constSizeBytes = 0;
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

// Blocks of `f` that fit on one SM, from NVIDIA's occupancy calculator (cuda_occupancy.h), with
// the function's shared memory carveout preference; -1 for input it refuses (a block of 0).
int occupancy(const State& s, Function& f, int block_threads, size_t dynamic_smem) {
  const cudaDeviceProp prop = properties(s);
  const cudaFuncAttributes attr = attributes_of(s, f);
  cudaOccDeviceProp occ_prop(prop);
  cudaOccFuncAttributes occ_attr(attr);
  // corpus: dynamic shared memory up to the default limit (48 KiB with the static) always
  // counts, even above a smaller MaxDynamicSharedMemorySize; above it, up to that setting
  const long long default_dynamic = s.profile["max_smem_per_block"] - f.res.static_smem;
  occ_attr.maxDynamicSharedSizeBytes = static_cast<size_t>(std::max<long long>(max_dynamic_smem(s, f), default_dynamic));
  cudaOccDeviceState occ_state;
  occ_state.carveoutConfig = f.carveout;
  cudaOccResult result{};
  const cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &occ_prop, &occ_attr, &occ_state,
                                                                block_threads, dynamic_smem);
  if (e == CUDA_OCC_ERROR_INVALID_INPUT) return -1;
  return e == CUDA_OCC_SUCCESS ? result.activeBlocksPerMultiprocessor : 0;
}

// Clusters of `size` blocks resident at once when `per_sm` blocks fit on one SM, as the driver
// places them (corpus, profiles.py gpc_sms): a cluster's blocks on distinct SMs of one GPC, at
// most cluster_blocks_per_sm blocks on an SM, so a GPC of n SMs holds n x blocks / size clusters
// and none if it has fewer SMs than the cluster has blocks. H200, one block per SM: 30 clusters
// of 4, 15 of 8, 7 of 16 where a pool of 132 SMs would hold 33, 16 and 8.
long long clusters_that_fit(const Profile& p, long long per_sm, long long size) {
  const long long blocks = std::min(per_sm, p["cluster_blocks_per_sm"]);
  long long clusters = 0;
  for (const long long sms : p.gpc_sms) {
    if (sms >= size) clusters += sms * blocks / size;
  }
  return clusters;
}

// ------------------------------------------------------------------------------------------
// Launch checks

struct LaunchConfig {
  dim3 grid, block;
  size_t smem = 0;
  dim3 cluster{0, 0, 0};  // from cudaLaunchAttributeClusterDimension; 0: none
  // from cudaLaunchAttributePreferredClusterDimension (SM100 dynamic clusters): recorded only,
  // the driver's rules for it are not in the corpus (an H200 has no preferred clusters)
  dim3 preferred_cluster{0, 0, 0};
  bool cooperative = false;
  bool pdl = false;
};

unsigned long long volume(const dim3& d) {
  return static_cast<unsigned long long>(d.x) * d.y * d.z;
}

// The cluster a launch asks for: the kernel's compile-time __cluster_dims__, else the launch
// attribute's, else the dimensions cudaFuncSetAttribute required (if all three are set).
dim3 launch_cluster(const Function& f, const LaunchConfig& c) {
  const dim3& req = f.required_cluster;
  if (f.res.cluster.x != 0) return f.res.cluster;
  if (volume(c.cluster) > 0) return c.cluster;
  return req.x && req.y && req.z ? req : dim3(0, 0, 0);
}

// The cluster's shape: everything but its size. cudaErrorInvalidClusterSize for each rule
// (selftest_h200.jsonl and corpus).
cudaError_t check_cluster_shape(const Profile& p, const Function& f, const LaunchConfig& c, Record& r) {
  auto reason = [&r](const std::string& why) -> Record& { return r.add("reason", why); };
  const dim3& fixed = f.res.cluster;
  const dim3& req = f.required_cluster;
  if (volume(c.cluster) > 0 && fixed.x != 0 &&
      (c.cluster.x != fixed.x || c.cluster.y != fixed.y || c.cluster.z != fixed.z)) {
    reason("cluster dimension differs from the kernel's compile-time __cluster_dims__");
    return cudaErrorInvalidClusterSize;
  }
  // corpus: each dimension cudaFuncSetAttribute required (nonzero) must be the launch's
  if (volume(c.cluster) > 0 && fixed.x == 0 &&
      ((req.x && req.x != c.cluster.x) || (req.y && req.y != c.cluster.y) || (req.z && req.z != c.cluster.z))) {
    reason("cluster dimension differs from the one cudaFuncSetAttribute required");
    return cudaErrorInvalidClusterSize;
  }
  // cuda_runtime_api.h: "The width, height, and depth values must either all be 0 or all be
  // positive. The validity of the cluster dimensions is checked at launch time." (corpus: only
  // a launch that gives no cluster of its own is refused for it)
  if (volume(c.cluster) == 0 && fixed.x == 0 && (req.x || req.y || req.z) && !(req.x && req.y && req.z)) {
    reason("the required cluster dimensions are neither all 0 nor all positive");
    return cudaErrorInvalidClusterSize;
  }
  const dim3 cluster = launch_cluster(f, c);
  if (volume(cluster) == 0) return cudaSuccess;
  if (p.cc() < 90) {
    reason("thread block clusters need compute capability 9.0");
    return cudaErrorNotSupported;
  }
  if (c.grid.x % cluster.x || c.grid.y % cluster.y || c.grid.z % cluster.z) {
    reason("grid is not a multiple of the cluster dimension");
    return cudaErrorInvalidClusterSize;
  }
  return cudaSuccess;
}

// The cluster's size: above the portable size without cudaFuncAttributeNonPortableClusterSizeAllowed
// (checked early), above the device's non-portable size with it (corpus: checked last).
cudaError_t check_cluster_size(const Profile& p, const Function& f, const LaunchConfig& c, Record& r,
                               bool non_portable) {
  if (non_portable != (f.non_portable_cluster != 0)) return cudaSuccess;
  const long long size = static_cast<long long>(volume(launch_cluster(f, c)));
  const long long limit = non_portable ? p["max_cluster_size_nonportable"] : p["max_cluster_size_portable"];
  if (size <= limit) return cudaSuccess;
  r.add("reason", non_portable ? "cluster exceeds the device's non-portable cluster size"
                               : "cluster exceeds the portable cluster size "
                                 "(cudaFuncAttributeNonPortableClusterSizeAllowed not set)")
      .add("limit", limit);
  return cudaErrorInvalidClusterSize;
}

cudaError_t check_launch(State& s, Function* f, const LaunchConfig& c, Record& r) {
  const Profile& p = s.profile;
  r.add("grid", c.grid).add("block", c.block).add("smem", static_cast<long long>(c.smem));
  if (volume(c.cluster) > 0) r.add("cluster", c.cluster);
  if (volume(c.preferred_cluster) > 0) r.add("preferred_cluster", c.preferred_cluster);
  if (c.cooperative) r.add("cooperative", true);
  if (c.pdl) r.add("programmatic_stream_serialization", true);
  if (f != nullptr) r.add("kernel", f->name);
  if (const cudaError_t e = usable(f); e != cudaSuccess) {
    return r.add("reason", f == nullptr ? "not a registered kernel" : !f->has_image
                     ? "no image in the executable runs on this device" : "kernel missing from the table"),
           e;
  }
  // The checks in the order the driver makes them: where a launch breaks several rules, the
  // error is the first one's (corpus). CUDA 13 launches go through the driver
  // (cuLaunchKernel[Ex]): a bad shape is cudaErrorInvalidValue on every launch path.
  auto reason = [&r](const std::string& why) -> Record& { return r.add("reason", why); };
  const unsigned long long threads = volume(c.block);
  if (threads == 0 || volume(c.grid) == 0) {
    reason("zero block or grid dimension");
    return cudaErrorInvalidValue;
  }
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
  if (const cudaError_t e = check_cluster_shape(p, *f, c, r); e != cudaSuccess) return e;
  if (const cudaError_t e = check_cluster_size(p, *f, c, r, false); e != cudaSuccess) return e;
  if (c.cooperative) {
    // corpus: a block that cannot be resident at all (registers, shared memory) makes any
    // cooperative grid too large, before those rules' own errors; a cluster grid is co-resident
    // when its clusters all fit as the driver places them (within GPCs), before the
    // non-portable cluster size is checked
    const long long per_sm = std::max(0, occupancy(s, *f, static_cast<int>(threads), c.smem));
    const long long cluster = static_cast<long long>(volume(launch_cluster(*f, c)));
    const long long resident = cluster > 0 ? clusters_that_fit(p, per_sm, cluster) * cluster : per_sm * p["sm_count"];
    if (static_cast<long long>(volume(c.grid)) > resident) {
      reason("cooperative grid exceeds the blocks that can be co-resident").add("limit", resident);
      return cudaErrorCooperativeLaunchTooLarge;
    }
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
  const int register_limit = register_limited_threads(s, *f);
  if (threads > static_cast<unsigned long long>(register_limit)) {
    reason("registers per thread x threads exceed the registers per block")
        .add("limit", static_cast<long long>(register_limit))
        .add("registers", static_cast<long long>(f->res.registers));
    return cudaErrorLaunchOutOfResources;
  }
  if (const cudaError_t e = check_cluster_size(p, *f, c, r, true); e != cudaSuccess) return e;
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
      case cudaLaunchAttributePreferredClusterDimension:
        c.preferred_cluster =
            dim3(a.val.preferredClusterDim.x, a.val.preferredClusterDim.y, a.val.preferredClusterDim.z);
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
// cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col. Each refusal is either a requirement cuda.h
// lists for the call (quoted where it is checked), or a rule the driver corpus shows
// (virtual/conformance/driver-corpus-h200.jsonl.gz, recorded on an H200, driver 580.159.04),
// marked "corpus". Requirements cuda.h lists that the driver does not enforce are not checked:
// a NULL global address (CUTLASS's SM100/SM120 placeholder descriptors) is accepted, and so are
// a tensorMap that is not 64-byte aligned and interleave 32B with a swizzle other than 32B.

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

// The arguments both encoders share, and those of each.
struct TensorMapCall {
  const char* call;
  const CUtensorMap* map;
  int type;
  cuuint32_t rank;
  const void* address;
  const cuuint64_t* dims;
  const cuuint64_t* strides;
  const cuuint32_t* elem_strides;
  int interleave, swizzle, l2, oob;
  const cuuint32_t* box = nullptr;  // tiled
  const int* lower = nullptr;       // im2col
  const int* upper = nullptr;
  cuuint32_t channels = 0, pixels = 0;
  bool im2col() const { return lower != nullptr; }
};

// A NULL array or tensor map is a pointer the driver would read or write; what it answers is
// recorded nowhere, so the virtual device stops instead of guessing.
void require_readable(const TensorMapCall& c) {
  const bool tiled_box = c.im2col() || c.box != nullptr;
  const bool corners = !c.im2col() || (c.lower != nullptr && c.upper != nullptr);
  if (c.map == nullptr || c.dims == nullptr || c.elem_strides == nullptr || !tiled_box || !corners ||
      (c.rank > 1 && c.strides == nullptr)) {
    fatal("%s with a NULL tensorMap or array argument: the driver's answer to that is not known", c.call);
  }
}

// The first requirement `c` violates on a device with profile `p`, or "".
std::string tensor_map_violation(const TensorMapCall& c, const Profile& p) {
  const bool packed16 = c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || c.type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
  const bool packed = packed16 || c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B;
  const bool i32 = c.interleave == CU_TENSOR_MAP_INTERLEAVE_32B;
  const bool atom = c.swizzle >= CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B;
  const int bits = tensor_map_element_bits(c.type);
  const auto addr = reinterpret_cast<uintptr_t>(c.address);
  const cuuint32_t rank = c.rank;
  // "tensorDataType has to be an enum from CUtensorMapDataType"; interleave, swizzle,
  // l2Promotion and oobFill likewise "must be of type" their enums
  if (bits == 0) return "tensorDataType " + std::to_string(c.type) + " is not a CUtensorMapDataType";
  if (c.interleave < CU_TENSOR_MAP_INTERLEAVE_NONE || c.interleave > CU_TENSOR_MAP_INTERLEAVE_32B) return "interleave is not a CUtensorMapInterleave";
  if (c.swizzle < CU_TENSOR_MAP_SWIZZLE_NONE || c.swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) return "swizzle is not a CUtensorMapSwizzle";
  if (c.l2 < CU_TENSOR_MAP_L2_PROMOTION_NONE || c.l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B) return "l2Promotion is not a CUtensorMapL2promotion";
  if (c.oob < CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE || c.oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) return "oobFill is not a CUtensorMapFloatOOBfill";
  if (c.im2col()) {
    // im2col: "tensorRank, which specifies the number of tensor dimensions, must be 3, 4, or 5."
    if (rank < 3 || rank > 5) return "tensorRank must be 3, 4, or 5 for im2col";
  } else {
    // "tensorRank must be non-zero and less than or equal to the maximum supported
    // dimensionality of 5. If interleave is not CU_TENSOR_MAP_INTERLEAVE_NONE, then tensorRank
    // must additionally be greater than or equal to 3."
    if (rank == 0 || rank > 5) return "tensorRank must be in [1, 5]";
    if (c.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) return "tensorRank must be >= 3 with interleave";
  }
  // "globalAddress ... must be 16 byte aligned." "When interleave is CU_TENSOR_MAP_INTERLEAVE_32B,
  // globalAddress must be 32 byte aligned." "When tensorDataType is ..._16U6_ALIGN16B or
  // ..._16U4_ALIGN16B, globalAddress must be 32 byte aligned."
  if (addr % 16) return "globalAddress must be 16-byte aligned";
  if ((i32 || packed16) && addr % 32) return "globalAddress must be 32-byte aligned (interleave 32B or 16U4/16U6_ALIGN16B)";
  // "globalDim array ... must be non-zero and less than or equal to 2^32." "When tensorDataType
  // is ..._16U6_ALIGN16B or ..._16U4_ALIGN16B, globalDim[0] must be a multiple of 128." "When
  // tensorDataType is ..._16U4_ALIGN8B, globalDim[0] must be a multiple of 2."
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (c.dims[i] == 0 || c.dims[i] > (1ull << 32)) return "globalDim[" + std::to_string(i) + "] must be in [1, 2^32]";
  }
  // "globalStrides array ... must be a multiple of 16 and less than 2^40." "When interleave is
  // CU_TENSOR_MAP_INTERLEAVE_32B, the strides must be a multiple of 32." "When tensorDataType is
  // ..._16U6_ALIGN16B or ..._16U4_ALIGN16B, the strides must be a multiple of 32."
  // (The formula's "globalStrides[i] >= globalDim[i]" is not enforced: corpus.)
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    const std::string which = "globalStrides[" + std::to_string(i) + "]";
    if (c.strides[i] % 16) return which + " must be a multiple of 16";
    if (c.strides[i] >= (1ull << 40)) return which + " must be < 2^40";
    if ((i32 || packed16) && c.strides[i] % 32) return which + " must be a multiple of 32 (interleave 32B or 16U4/16U6_ALIGN16B)";
  }
  unsigned long long inner_bits;
  if (c.im2col()) {
    // "When tensorRank is 3, one signed offset within range [-32768, 32767] is supported. When
    // tensorRank is 4, two signed offsets each within range [-128, 127] are supported. When
    // tensorRank is 5, three offsets each within range [-16, 15] are supported." (both corners)
    const int limit = rank == 3 ? 32768 : rank == 4 ? 128 : 16;
    for (cuuint32_t k = 0; k + 2 < rank; ++k) {
      if (c.lower[k] < -limit || c.lower[k] >= limit || c.upper[k] < -limit || c.upper[k] >= limit) {
        return "pixelBoxLowerCorner/UpperCorner[" + std::to_string(k) + "] outside [" + std::to_string(-limit) + ", " +
               std::to_string(limit - 1) + "] for rank " + std::to_string(rank);
      }
    }
    // "The bounding box specified by pixelBoxLowerCorner and pixelBoxUpperCorner must have
    // non-zero area." Corpus: corner k bounds globalDim[k + 1] with interleave NONE, and
    // globalDim[k] with interleave 16B or 32B (the driver counts the dimensions one lower
    // there); the extent is that dimension + upper[k] - lower[k].
    const cuuint32_t first = c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE ? 1 : 0;
    for (cuuint32_t k = 0; k + 2 < rank; ++k) {
      if (static_cast<long long>(c.dims[k + first]) + c.upper[k] - c.lower[k] <= 0) {
        return "the pixel bounding box has zero area in globalDim[" + std::to_string(k + first) + "]";
      }
    }
    // "channelsPerPixel ... must be less than or equal to 256." "pixelsPerColumn ... must be less
    // than or equal to 1024." Corpus: 0 is refused for either.
    if (c.channels == 0 || c.channels > 256) return "channelsPerPixel must be in [1, 256]";
    if (c.pixels == 0 || c.pixels > 1024) return "pixelsPerColumn must be in [1, 1024]";
    inner_bits = static_cast<unsigned long long>(c.channels) * bits;
  } else {
    // "boxDim array ... must be non-zero and less than or equal to 256."
    for (cuuint32_t i = 0; i < rank; ++i) {
      if (c.box[i] == 0 || c.box[i] > 256) return "boxDim[" + std::to_string(i) + "] must be in [1, 256]";
    }
    inner_bits = static_cast<unsigned long long>(c.box[0]) * bits;
  }
  // "{ boxDim[0] * elementSizeInBytes( tensorDataType ) } must be a multiple of 16 bytes", which
  // cuda.h states for interleave NONE; corpus: for every interleave, and for im2col's
  // channelsPerPixel as well.
  if (inner_bits % (16 * 8)) return "inner box dimension * element size must be a multiple of 16 bytes";
  // "elementStrides array ... must be non-zero and less than or equal to 8."
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (c.elem_strides[i] == 0 || c.elem_strides[i] > 8) return "elementStrides[" + std::to_string(i) + "] must be in [1, 8]";
  }
  // Which data types and swizzles the device has: the profile (corpus on sm90: every packed type
  // and every 128B_ATOM swizzle is refused there).
  if (packed && !p.i("tma_packed_types")) return "packed data types (16U4/16U6) are not supported on this device";
  if (atom && !p.i("tma_swizzle_atom")) return "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_* is not supported on this device";
  // "When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is not CU_TENSOR_MAP_SWIZZLE_NONE,
  // the bounding box inner dimension (computed as boxDim[0] [im2col: channelsPerPixel] multiplied
  // by element size ...) must be less than or equal to the swizzle size." (32B: 32, 64B: 64,
  // "CU_TENSOR_MAP_SWIZZLE_128B* require the bounding box inner dimension to be <= 128.")
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && c.swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    const unsigned long long span = c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : c.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : 128;
    if (inner_bits > span * 8) return "inner box dimension exceeds the swizzle span of " + std::to_string(span) + " bytes";
  }
  // The packed types' own requirements (reached only where the profile has them; not in the
  // sm90 corpus): "When tensorDataType is ..._16U6_ALIGN16B or ..._16U4_ALIGN16B, globalDim[0]
  // must be a multiple of 128." "When tensorDataType is ..._16U4_ALIGN8B, globalDim[0] must be a
  // multiple of 2." "When tensorDataType is ..._16U6_ALIGN16B or ..._16U4_ALIGN16B, boxDim[0]
  // [im2col: channelsPerPixel] must be 128." "tensorDataType of CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
  // requires interleave to be CU_TENSOR_MAP_INTERLEAVE_NONE." "When the tensorDataType is
  // CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, only the following swizzle modes are supported: NONE,
  // 128B, 128B_ATOM_32B, 128B_ATOM_64B (Store only)" "When the tensorDataType is
  // CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, only ... NONE, 128B, 128B_ATOM_32B (Load only)"
  if (packed16 && c.dims[0] % 128) return "globalDim[0] must be a multiple of 128 for 16U4/16U6_ALIGN16B";
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && c.dims[0] % 2) return "globalDim[0] must be a multiple of 2 for 16U4_ALIGN8B";
  if (packed16 && (c.im2col() ? c.channels : c.box[0]) != 128) return "boxDim[0] (channelsPerPixel) must be 128 for 16U4/16U6_ALIGN16B";
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && c.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return "16U6_ALIGN16B requires interleave NONE";
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
      !(c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
        c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B || c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)) {
    return "16U6_ALIGN16B supports swizzle NONE, 128B, 128B_ATOM_32B, 128B_ATOM_64B only";
  }
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B &&
      !(c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
        c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)) {
    return "16U4_ALIGN16B supports swizzle NONE, 128B, 128B_ATOM_32B only";
  }
  // "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA can only be used when tensorDataType
  // represents a floating-point data type, and when tensorDataType is not ..._16U4_ALIGN8B,
  // ..._16U4_ALIGN16B, and ..._16U6_ALIGN16B."
  if (c.oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float_type(c.type)) return "NaN OOB fill needs a floating-point data type";
  // Corpus, no header sentence: the box a copy moves must fit the shared memory one block may
  // have. Tiled: the product over dimensions of floor(boxDim[i] / elementStrides[i]) elements
  // (floor: a box smaller than its stride counts 0); im2col: channelsPerPixel * pixelsPerColumn
  // elements. The H200 accepted 228,608 bytes and refused 237,600 (tiled), accepted 232,288
  // (im2col): the device's opt-in limit per block, 232,448 there.
  unsigned long long elements = 1;
  if (c.im2col()) {
    elements = static_cast<unsigned long long>(c.channels) * c.pixels;
  } else {
    for (cuuint32_t i = 0; i < rank; ++i) elements *= c.box[i] / c.elem_strides[i];
  }
  const unsigned long long limit = static_cast<unsigned long long>(p["max_smem_per_block_optin"]);
  if (elements * bits / 8 > limit) return "the box (" + std::to_string(elements * bits / 8) + " bytes) exceeds the shared memory per block (" + std::to_string(limit) + ")";
  return "";
}

CUresult encode(const TensorMapCall& c, CUtensorMap* map) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ensure_loaded(s);
  Record r(c.call);
  require_readable(c);
  const std::string why = tensor_map_violation(c, s.profile);
  r.add("data_type", static_cast<long long>(c.type)).add("rank", static_cast<long long>(c.rank));
  r.add("address_mod_64", static_cast<long long>(reinterpret_cast<uintptr_t>(c.address) % 64));
  r.add("null_address", c.address == nullptr);
  if (c.rank >= 1 && c.rank <= 5) {
    r.raw("global_dim", list(c.dims, c.rank, true)).raw("element_strides", list(c.elem_strides, c.rank, false));
    if (c.box) r.raw("box_dim", list(c.box, c.rank, false));
    if (c.strides) r.raw("global_strides", list(c.strides, c.rank - 1, true));
  }
  if (c.im2col()) r.add("channels", static_cast<long long>(c.channels)).add("pixels", static_cast<long long>(c.pixels));
  r.add("interleave", static_cast<long long>(c.interleave)).add("swizzle", static_cast<long long>(c.swizzle));
  const CUresult result = why.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (!why.empty()) r.add("reason", why);
  if (result == CUDA_SUCCESS) std::memset(map, 0, sizeof(*map));
  r.add("result", result == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_INVALID_VALUE");
  write(s, r);
  return result;
}

CUresult CUDAAPI encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                              const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                              const cuuint32_t* elem_strides, CUtensorMapInterleave interleave,
                              CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  TensorMapCall c{"cuTensorMapEncodeTiled", map, type, rank, address, dims, strides, elem_strides,
                  interleave, swizzle, l2, oob};
  c.box = box;
  return encode(c, map);
}

CUresult CUDAAPI encode_im2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                               const cuuint64_t* dims, const cuuint64_t* strides, const int* lower, const int* upper,
                               cuuint32_t channels, cuuint32_t pixels, const cuuint32_t* elem_strides,
                               CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                               CUtensorMapFloatOOBfill oob) {
  TensorMapCall c{"cuTensorMapEncodeIm2col", map, type, rank, address, dims, strides, elem_strides,
                  interleave, swizzle, l2, oob};
  c.lower = lower;
  c.upper = upper;
  c.channels = channels;
  c.pixels = pixels;
  if (lower == nullptr || upper == nullptr) fatal("cuTensorMapEncodeIm2col with NULL corners: the driver's answer to that is not known");
  return encode(c, map);
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
      // corpus: every value is accepted (-2, 2, 101 too); a nonzero one allows non-portable sizes
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
      const unsigned fixed = attr == cudaFuncAttributeRequiredClusterWidth    ? f->res.cluster.x
                             : attr == cudaFuncAttributeRequiredClusterHeight ? f->res.cluster.y
                                                                              : f->res.cluster.z;
      // cuda_runtime_api.h: "If the value is set during compile time, it cannot be set at
      // runtime" (it names cudaErrorNotPermitted; the H200 answers cudaErrorInvalidValue, and
      // accepts the compile-time value itself: corpus)
      if (f->res.cluster.x != 0 && static_cast<unsigned>(value) != fixed) {
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
  r.add("kernel", f->name).add("block_size", static_cast<long long>(block_size));
  const int n = occupancy(s, *f, block_size, dynamic_smem);
  if (n < 0) return finish(s, r.add("reason", "block size must be positive"), cudaErrorInvalidValue);  // corpus
  *blocks = n;
  return finish(s, r.add("blocks", static_cast<long long>(*blocks)), cudaSuccess);
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func,
                                                                            int block_size, size_t dynamic_smem,
                                                                            unsigned int) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, func, block_size, dynamic_smem);
}

// Clusters that fit at once (clusters_that_fit). The driver validates the configuration in
// this order (corpus): the grid's dimensions (cudaErrorInvalidValue; the block's are not
// checked), then the cluster's shape and portable size as a launch checks them
// (cudaErrorInvalidClusterSize), then the block size; no cluster at all is 0 clusters, and so is
// a non-portable size no GPC holds (no error: the launch would refuse it, the question is not).
cudaError_t CUDARTAPI cudaOccupancyMaxActiveClusters(int* clusters, const void* func, const cudaLaunchConfig_t* config) {
  VCUDART_BEGIN("cudaOccupancyMaxActiveClusters");
  Function* f = find_function(s, func);
  if (clusters == nullptr || config == nullptr) return finish(s, r, cudaErrorInvalidValue);
  if (const cudaError_t e = usable(f); e != cudaSuccess) return finish(s, r, e);
  const Profile& p = s.profile;
  LaunchConfig c;
  c.grid = config->gridDim;
  c.block = config->blockDim;
  c.smem = config->dynamicSmemBytes;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& d = config->attrs[i].val.clusterDim;
      c.cluster = dim3(d.x, d.y, d.z);
    }
  }
  r.add("kernel", f->name).add("grid", c.grid).add("block", c.block);
  if (volume(c.grid) == 0 || c.grid.x > static_cast<unsigned>(p.i("max_grid_dim_x")) ||
      c.grid.y > static_cast<unsigned>(p.i("max_grid_dim_y")) || c.grid.z > static_cast<unsigned>(p.i("max_grid_dim_z"))) {
    return finish(s, r.add("reason", "zero grid dimension or grid exceeds the device's grid dimensions"),
                  cudaErrorInvalidValue);
  }
  if (const cudaError_t e = check_cluster_shape(p, *f, c, r); e != cudaSuccess) return finish(s, r, e);
  if (const cudaError_t e = check_cluster_size(p, *f, c, r, false); e != cudaSuccess) return finish(s, r, e);
  const dim3 cluster = launch_cluster(*f, c);
  const long long size = static_cast<long long>(volume(cluster));
  r.add("cluster", cluster);
  if (size == 0) {
    *clusters = 0;
    return finish(s, r.add("reason", "no cluster dimension given").add("clusters", 0LL), cudaSuccess);
  }
  const long long per_sm = occupancy(s, *f, static_cast<int>(volume(c.block)), c.smem);
  if (per_sm < 0) return finish(s, r.add("reason", "block size must be positive"), cudaErrorInvalidValue);
  *clusters = static_cast<int>(clusters_that_fit(p, per_sm, size));
  return finish(s, r.add("blocks_per_sm", per_sm).add("clusters", static_cast<long long>(*clusters)), cudaSuccess);
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
  *fn = name == "cuTensorMapEncodeTiled"    ? reinterpret_cast<void*>(&encode_tiled)
        : name == "cuTensorMapEncodeIm2col" ? reinterpret_cast<void*>(&encode_im2col)
        : name == "cuGetErrorString"        ? reinterpret_cast<void*>(&driver_get_error_string)
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
