// Driver conformance probe: every host-side decision vcudart answers, asked of whatever CUDA
// runtime this program is linked against, one JSON line per call.
//
// Built against the real cudart and run on a GPU (scripts/gpu-driver-corpus.sh) it records what
// the driver decides: the corpus. Built against vcudart (--cudart=none libvcudart.a) and run with
// a virtual profile it must print the same lines (tests/test_driver_corpus.py replays it); every
// line that differs is a rule vcudart gets wrong.
//
//   probe SEED COUNT [FROM]
//
// prints a header line, then the hand-picked edges followed by COUNT calls generated from SEED,
// numbered by "i" from 0; lines before FROM are generated but not run (a restart after a sticky
// error or a crash resumes there). Each line is written in two parts, the call and its arguments
// before the call is made and the results after it, and flushed, so that a call that kills the
// process still leaves its arguments behind for the driver script to complete.
//
// Every kernel here is harmless if it runs: none touches memory it does not own, so an accepted
// launch cannot leave a sticky error behind. Each launch is followed by cudaGetLastError and
// cudaDeviceSynchronize; a failed synchronize ends the program with status 75 after its line,
// and the script starts it again after that call.
//
// The only randomness is a splitmix64 generator of our own, so the calls are the same on every
// machine and with every compiler.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int kVersion = 1;  // bump when the calls a seed produces change

// ------------------------------------------------------------------------------------------
// kernels: each has fixed attribute state, set once at start-up (see setup())

__device__ float g_in[4096];  // zero: nothing below ever stores through a value read from it
__device__ float g_sink;

__global__ void k_empty() {}
__global__ void k_optin() {}        // MaxDynamicSharedMemorySize = opt-in limit
__global__ void k_nonportable() {}  // that, and NonPortableClusterSizeAllowed = 1
__global__ void k_attr() {}         // target of the generated cudaFuncSetAttribute calls
__global__ void __cluster_dims__(2, 1, 1) k_cluster2() {}

__global__ void __launch_bounds__(384, 1) k_static() {
  __shared__ float s[2048];  // 8 KiB static shared memory
  for (unsigned i = threadIdx.x; i < 2048; i += blockDim.x) s[i] = g_in[i];
  __syncthreads();
  if (s[(threadIdx.x * 7) % 2048] == 12345.f) g_sink = 1.f;
}

// Keeps many values live at once so that ptxas needs well over 64 registers per thread.
__global__ void k_regs() {
  float v[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) v[i] = g_in[(threadIdx.x * 97 + i * 31) % 4096];
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) {
#pragma unroll
    for (int j = i + 1; j < 96; j += 7) acc += v[i] * v[j];
  }
  if (acc == 12345.f) g_sink = acc;
}

struct Kernel {
  const char* name;
  const void* fn;
};

const Kernel kKernels[] = {
    {"k_empty", reinterpret_cast<const void*>(&k_empty)},
    {"k_optin", reinterpret_cast<const void*>(&k_optin)},
    {"k_nonportable", reinterpret_cast<const void*>(&k_nonportable)},
    {"k_attr", reinterpret_cast<const void*>(&k_attr)},
    {"k_cluster2", reinterpret_cast<const void*>(&k_cluster2)},
    {"k_static", reinterpret_cast<const void*>(&k_static)},
    {"k_regs", reinterpret_cast<const void*>(&k_regs)},
};
constexpr int kKernelCount = sizeof(kKernels) / sizeof(kKernels[0]);

// ------------------------------------------------------------------------------------------
// deterministic randomness

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }
  template <typename T, size_t N>
  T pick(const T (&values)[N]) {
    return values[below(N)];
  }
};

// ------------------------------------------------------------------------------------------
// output

std::string list_u64(const uint64_t* v, int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string list_i64(const int64_t* v, int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string dim(const dim3& d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]";
}

// One JSON object, written as `{"k":v,...`; close() ends it.
struct Fields {
  std::string body;
  Fields& raw(const char* key, const std::string& json) {
    body += (body.empty() ? "\"" : ",\"") + std::string(key) + "\":" + json;
    return *this;
  }
  Fields& num(const char* key, long long v) { return raw(key, std::to_string(v)); }
  Fields& str(const char* key, const char* v) { return raw(key, "\"" + std::string(v) + "\""); }
  Fields& flag(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
};

const char* cu_name(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

std::string cu_result(CUresult r) {
  const char* name = cu_name(r);
  return name ? "\"" + std::string(name) + "\"" : "\"CUresult " + std::to_string(static_cast<int>(r)) + "\"";
}

// ------------------------------------------------------------------------------------------
// the device as the program sees it

using EncodeTiled = decltype(&cuTensorMapEncodeTiled);
using EncodeIm2col = decltype(&cuTensorMapEncodeIm2col);

struct Device {
  char* base = nullptr;  // cudaMalloc: 256-byte aligned
  char* host = nullptr;  // a host buffer, 256-byte aligned
  int optin = 0;         // cudaDevAttrMaxSharedMemoryPerBlockOptin
  EncodeTiled tiled = nullptr;
  EncodeIm2col im2col = nullptr;
};

Device g;
long long g_from = 0;

// One call: arguments first (flushed), then the results; nothing is printed before FROM.
class Call {
 public:
  Call(long long i, const char* name, const Fields& args) : live_(i >= g_from) {
    if (!live_) return;
    std::printf("{\"i\":%lld,\"call\":\"%s\",\"args\":{%s}", i, name, args.body.c_str());
    std::fflush(stdout);
  }
  bool live() const { return live_; }
  void done(const Fields& results) {
    std::printf(",%s}\n", results.body.c_str());
    std::fflush(stdout);
  }

 private:
  bool live_;
};

// ------------------------------------------------------------------------------------------
// tensor maps

struct TensorMapArgs {
  bool im2col = false;
  int type = 0;
  unsigned rank = 0;
  const char* addr_kind = "device";  // "device", "null", "host", "device_far"
  long long addr_offset = 0;
  int map_offset = 0;  // bytes added to a 64-byte aligned CUtensorMap
  uint64_t dims[8] = {};
  uint64_t strides[8] = {};
  uint64_t box[8] = {};     // tiled: boxDim
  uint64_t estr[8] = {};    // elementStrides
  int64_t lower[8] = {};    // im2col: pixelBoxLowerCorner
  int64_t upper[8] = {};    // im2col: pixelBoxUpperCorner
  uint64_t channels = 0;    // im2col: channelsPerPixel
  uint64_t pixels = 0;      // im2col: pixelsPerColumn
  int interleave = 0, swizzle = 0, l2 = 0, oob = 0;
};

// How many of the arrays' entries a call reads; the rank arrays hold 8, so a rank past the
// documented 5 reads initialized values.
int shown(unsigned rank) { return rank > 8 ? 8 : static_cast<int>(rank); }

Fields tensor_map_fields(const TensorMapArgs& a) {
  Fields f;
  const int n = shown(a.rank);
  f.num("type", a.type).num("rank", a.rank).str("addr", a.addr_kind).num("addr_offset", a.addr_offset);
  f.num("map_offset", a.map_offset).raw("dims", list_u64(a.dims, n)).raw("strides", list_u64(a.strides, n > 0 ? n - 1 : 0));
  if (a.im2col) {
    const int corners = n >= 2 ? n - 2 : 0;
    f.raw("lower", list_i64(a.lower, corners)).raw("upper", list_i64(a.upper, corners));
    f.num("channels", static_cast<long long>(a.channels)).num("pixels", static_cast<long long>(a.pixels));
  } else {
    f.raw("box", list_u64(a.box, n));
  }
  f.raw("estr", list_u64(a.estr, n)).num("interleave", a.interleave).num("swizzle", a.swizzle);
  return f.num("l2", a.l2).num("oob", a.oob);
}

void* address_of(const TensorMapArgs& a) {
  const std::string kind = a.addr_kind;
  if (kind == "null") return nullptr;
  char* start = kind == "host" ? g.host : kind == "device_far" ? g.base + (1ll << 30) : g.base;
  return start + a.addr_offset;
}

void encode(long long i, const TensorMapArgs& a) {
  Call call(i, a.im2col ? "cuTensorMapEncodeIm2col" : "cuTensorMapEncodeTiled", tensor_map_fields(a));
  if (!call.live()) return;
  alignas(64) static unsigned char storage[256];
  auto* map = reinterpret_cast<CUtensorMap*>(storage + a.map_offset);
  cuuint64_t dims[8], strides[8];
  cuuint32_t box[8], estr[8];
  int lower[8], upper[8];
  for (int k = 0; k < 8; ++k) {
    dims[k] = a.dims[k];
    strides[k] = a.strides[k];
    box[k] = static_cast<cuuint32_t>(a.box[k]);
    estr[k] = static_cast<cuuint32_t>(a.estr[k]);
    lower[k] = static_cast<int>(a.lower[k]);
    upper[k] = static_cast<int>(a.upper[k]);
  }
  const auto type = static_cast<CUtensorMapDataType>(a.type);
  const auto interleave = static_cast<CUtensorMapInterleave>(a.interleave);
  const auto swizzle = static_cast<CUtensorMapSwizzle>(a.swizzle);
  const auto l2 = static_cast<CUtensorMapL2promotion>(a.l2);
  const auto oob = static_cast<CUtensorMapFloatOOBfill>(a.oob);
  if ((a.im2col ? reinterpret_cast<void*>(g.im2col) : reinterpret_cast<void*>(g.tiled)) == nullptr) {
    call.done(Fields().str("result", "no entry point"));
    return;
  }
  const CUresult r =
      a.im2col ? g.im2col(map, type, a.rank, address_of(a), dims, strides, lower, upper,
                          static_cast<cuuint32_t>(a.channels), static_cast<cuuint32_t>(a.pixels), estr, interleave,
                          swizzle, l2, oob)
               : g.tiled(map, type, a.rank, address_of(a), dims, strides, box, estr, interleave, swizzle, l2, oob);
  call.done(Fields().raw("result", cu_result(r)));
}

// Bits one element occupies in global memory (the packed types: 16 values in 8 or 16 bytes).
int element_bits(int type) {
  static const int bits[] = {8, 16, 32, 32, 64, 64, 16, 32, 64, 16, 32, 32, 32, 4, 8, 8};
  return type >= 0 && type < 16 ? bits[type] : 8;
}

bool packed16(int type) { return type == 14 || type == 15; }
bool is_float(int type) { return (type >= 6 && type <= 12); }

// A tensor map that every documented rule accepts, for the given type, rank and modes: the
// generator's starting point, so that one mutation tests one rule.
TensorMapArgs valid_map(Rng& rng, bool im2col, int type, unsigned rank, int interleave, int swizzle) {
  TensorMapArgs a;
  a.im2col = im2col;
  a.type = type;
  a.rank = rank;
  a.interleave = interleave;
  a.swizzle = swizzle;
  a.l2 = static_cast<int>(rng.below(4));
  a.oob = is_float(type) && rng.chance(30) ? 1 : 0;
  const int bits = element_bits(type);
  const uint64_t align = (interleave == 2 || packed16(type)) ? 32 : 16;
  const uint64_t span = swizzle == 0 ? 256 : swizzle == 1 ? 32 : swizzle == 2 ? 64 : 128;  // inner bytes
  for (unsigned k = 0; k < rank; ++k) {
    a.dims[k] = rng.chance(50) ? static_cast<uint64_t>(rng.range(1, 300)) : 128 * static_cast<uint64_t>(rng.range(1, 64));
    a.estr[k] = rng.chance(80) ? 1 : static_cast<uint64_t>(rng.range(1, 8));
  }
  if (packed16(type)) a.dims[0] = 128 * static_cast<uint64_t>(rng.range(1, 16));
  if (type == 13) a.dims[0] += a.dims[0] % 2;
  uint64_t stride = (a.dims[0] * bits / 8 + align - 1) / align * align;
  for (unsigned k = 0; k + 1 < rank; ++k) {
    a.strides[k] = stride;
    stride = (stride * a.dims[k + 1] + align - 1) / align * align;
  }
  // inner box: a multiple of 16 bytes (of the interleave's unit if interleaved) within the span
  const uint64_t max_inner = interleave == 0 ? std::min<uint64_t>(span, 256 * bits / 8) : 256 * bits / 8;
  const uint64_t chunks = std::max<uint64_t>(1, max_inner / 16);
  const uint64_t inner_bytes = 16 * static_cast<uint64_t>(rng.range(1, static_cast<int64_t>(chunks)));
  const uint64_t inner = std::max<uint64_t>(1, std::min<uint64_t>(256, inner_bytes * 8 / bits));
  for (unsigned k = 0; k < rank; ++k) a.box[k] = k == 0 ? inner : static_cast<uint64_t>(rng.range(1, 256));
  if (packed16(type)) a.box[0] = 128;
  if (im2col) {
    const int64_t limit = rank == 3 ? 32767 : rank == 4 ? 127 : 15;
    for (unsigned k = 0; k + 2 < rank; ++k) {
      a.lower[k] = rng.range(-limit - 1, 0);
      a.upper[k] = rng.range(-limit - 1, limit);
    }
    a.channels = packed16(type) ? 128 : inner;
    a.pixels = static_cast<uint64_t>(rng.range(1, 1024));
  }
  return a;
}

const uint64_t kDimEdges[] = {0, 1, 2, 127, 129, 255, (1ull << 31), (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 1, 1ull << 40};
const uint64_t kStrideEdges[] = {0, 8, 16, 24, 32, 48, 512, (1ull << 40) - 32, (1ull << 40) - 16, 1ull << 40, (1ull << 40) + 16};
const uint64_t kBoxEdges[] = {0, 1, 2, 3, 8, 16, 32, 64, 128, 255, 256, 257, 512};
const uint64_t kEstrEdges[] = {0, 1, 2, 7, 8, 9, 16};
const long long kAddrOffsets[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256};
const int64_t kCornerEdges[] = {-32769, -32768, -129, -128, -17, -16, -1, 0, 1, 14, 15, 16, 127, 128, 32767, 32768};

// Change one thing about a map, toward an edge of its documented range or past it.
void mutate(Rng& rng, TensorMapArgs& a) {
  const unsigned n = a.rank >= 1 && a.rank <= 8 ? a.rank : 1;
  const unsigned k = static_cast<unsigned>(rng.below(n));
  switch (rng.below(a.im2col ? 16 : 13)) {
    case 0: a.type = rng.chance(85) ? static_cast<int>(rng.below(16)) : static_cast<int>(rng.range(16, 20)); break;
    case 1: a.rank = static_cast<unsigned>(rng.range(0, 7)); break;
    case 2: {
      const char* kinds[] = {"null", "host", "device_far", "device"};
      a.addr_kind = rng.pick(kinds);
      a.addr_offset = rng.chance(50) ? rng.pick(kAddrOffsets) : 0;
      break;
    }
    case 3: a.dims[k] = rng.pick(kDimEdges); break;
    case 4:
      if (k + 1 < n) a.strides[k] = rng.chance(70) ? rng.pick(kStrideEdges) : a.strides[k] + 16 * static_cast<uint64_t>(rng.range(-4, 4));
      else a.dims[k] = rng.pick(kDimEdges);
      break;
    case 5: a.box[k] = rng.pick(kBoxEdges); break;
    case 6: a.estr[k] = rng.pick(kEstrEdges); break;
    case 7: a.interleave = static_cast<int>(rng.range(0, 3)); break;
    case 8: a.swizzle = static_cast<int>(rng.range(0, 7)); break;
    case 9: a.l2 = static_cast<int>(rng.range(0, 4)); break;
    case 10: a.oob = static_cast<int>(rng.range(0, 2)); break;
    case 11: a.map_offset = rng.chance(50) ? 0 : static_cast<int>(8 * rng.range(1, 7)); break;
    case 12: a.addr_offset = rng.pick(kAddrOffsets); break;
    case 13: a.lower[k % (n >= 3 ? n - 2 : 1)] = rng.pick(kCornerEdges); break;
    case 14: a.upper[k % (n >= 3 ? n - 2 : 1)] = rng.pick(kCornerEdges); break;
    default: {
      const uint64_t edges[] = {0, 1, 16, 32, 64, 128, 255, 256, 257, 1023, 1024, 1025};
      if (rng.chance(50)) a.channels = rng.pick(edges);
      else a.pixels = rng.pick(edges);
    }
  }
}

TensorMapArgs random_map(Rng& rng, bool im2col) {
  const int type = static_cast<int>(rng.below(16));
  const int interleave = rng.chance(75) ? 0 : static_cast<int>(rng.range(1, 2));
  unsigned rank = static_cast<unsigned>(im2col ? rng.range(3, 5) : rng.range(1, 5));
  if (interleave != 0 && rank < 3) rank = 3;
  int swizzle = interleave == 2 ? 1 : static_cast<int>(rng.below(7));
  if (packed16(type)) {
    const int ok[] = {0, 3, 4};
    swizzle = rng.pick(ok);
  }
  TensorMapArgs a = valid_map(rng, im2col, type, rank, interleave, swizzle);
  const uint64_t counts[] = {0, 1, 1, 1, 2, 3};
  const uint64_t mutations = rng.pick(counts);
  for (uint64_t m = 0; m < mutations; ++m) mutate(rng, a);
  return a;
}

// ------------------------------------------------------------------------------------------
// functions and launches

// cudaGetLastError after a call, so that no error of one call is seen by the next.
const char* last_error() { return cudaGetErrorName(cudaGetLastError()); }

void func_attributes(long long i, int kernel) {
  Call call(i, "cudaFuncGetAttributes", Fields().str("kernel", kKernels[kernel].name));
  if (!call.live()) return;
  cudaFuncAttributes a{};
  const cudaError_t e = cudaFuncGetAttributes(&a, kKernels[kernel].fn);
  Fields r;
  r.str("result", cudaGetErrorName(e));
  if (e == cudaSuccess) {
    r.num("static_smem", static_cast<long long>(a.sharedSizeBytes)).num("max_dynamic_smem", a.maxDynamicSharedSizeBytes);
    r.num("max_threads", a.maxThreadsPerBlock).num("registers", a.numRegs).num("carveout", a.preferredShmemCarveout);
    r.num("local_bytes", static_cast<long long>(a.localSizeBytes)).num("const_bytes", static_cast<long long>(a.constSizeBytes));
    r.raw("required_cluster", dim(dim3(a.requiredClusterWidth, a.requiredClusterHeight, a.requiredClusterDepth)));
    r.num("non_portable_cluster", a.nonPortableClusterSizeAllowed).num("scheduling_policy", a.clusterSchedulingPolicyPreference);
  }
  call.done(r.str("last", last_error()));
}

void set_attribute(long long i, int kernel, int attr, int value) {
  // made before FROM as well: later calls depend on the state it leaves
  Call call(i, "cudaFuncSetAttribute", Fields().str("kernel", kKernels[kernel].name).num("attr", attr).num("value", value));
  const cudaError_t e = cudaFuncSetAttribute(kKernels[kernel].fn, static_cast<cudaFuncAttribute>(attr), value);
  if (!call.live()) {
    cudaGetLastError();
    return;
  }
  call.done(Fields().str("result", cudaGetErrorName(e)).str("last", last_error()));
}

struct LaunchArgs {
  const char* api = "cudaLaunchKernelExC";  // or cudaLaunchKernel, cudaLaunchCooperativeKernel
  int kernel = 0;
  dim3 grid{1, 1, 1}, block{32, 1, 1};
  long long smem = 0;
  dim3 cluster{0, 0, 0};  // cudaLaunchAttributeClusterDimension; 0: not given
  bool cooperative = false;  // cudaLaunchAttributeCooperative
};

void launch(long long i, const LaunchArgs& a) {
  Fields f;
  f.str("api", a.api).str("kernel", kKernels[a.kernel].name).raw("grid", dim(a.grid)).raw("block", dim(a.block));
  f.num("smem", a.smem);
  if (a.cluster.x | a.cluster.y | a.cluster.z) f.raw("cluster", dim(a.cluster));
  if (a.cooperative) f.flag("cooperative", true);
  Call call(i, "launch", f);
  if (!call.live()) return;
  const void* fn = kKernels[a.kernel].fn;
  const std::string api = a.api;
  cudaError_t e;
  if (api == "cudaLaunchKernel") {
    e = cudaLaunchKernel(fn, a.grid, a.block, nullptr, static_cast<size_t>(a.smem), nullptr);
  } else if (api == "cudaLaunchCooperativeKernel") {
    e = cudaLaunchCooperativeKernel(fn, a.grid, a.block, nullptr, static_cast<size_t>(a.smem), nullptr);
  } else {
    cudaLaunchAttribute attrs[2];
    unsigned n = 0;
    if (a.cluster.x | a.cluster.y | a.cluster.z) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n].val.clusterDim.x = a.cluster.x;
      attrs[n].val.clusterDim.y = a.cluster.y;
      attrs[n].val.clusterDim.z = a.cluster.z;
      ++n;
    }
    if (a.cooperative) {
      attrs[n].id = cudaLaunchAttributeCooperative;
      attrs[n].val.cooperative = 1;
      ++n;
    }
    cudaLaunchConfig_t config{};
    config.gridDim = a.grid;
    config.blockDim = a.block;
    config.dynamicSmemBytes = static_cast<size_t>(a.smem);
    config.attrs = attrs;
    config.numAttrs = n;
    e = cudaLaunchKernelExC(&config, fn, nullptr);
  }
  const char* last = last_error();
  const cudaError_t sync = cudaDeviceSynchronize();
  call.done(Fields().str("result", cudaGetErrorName(e)).str("last", last).str("sync", cudaGetErrorName(sync)));
  if (sync != cudaSuccess) std::exit(75);  // a sticky error: the script restarts after this call
}

void occupancy_blocks(long long i, int kernel, int block, long long smem) {
  Call call(i, "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
            Fields().str("kernel", kKernels[kernel].name).num("block", block).num("smem", smem));
  if (!call.live()) return;
  int blocks = -1;
  const cudaError_t e =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernels[kernel].fn, block, static_cast<size_t>(smem));
  Fields r;
  r.str("result", cudaGetErrorName(e));
  if (e == cudaSuccess) r.num("blocks", blocks);
  call.done(r.str("last", last_error()));
}

void occupancy_clusters(long long i, int kernel, dim3 grid, dim3 block, long long smem, dim3 cluster) {
  Fields f;
  f.str("kernel", kKernels[kernel].name).raw("grid", dim(grid)).raw("block", dim(block)).num("smem", smem);
  if (cluster.x | cluster.y | cluster.z) f.raw("cluster", dim(cluster));
  Call call(i, "cudaOccupancyMaxActiveClusters", f);
  if (!call.live()) return;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster.x;
  attr.val.clusterDim.y = cluster.y;
  attr.val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.attrs = &attr;
  config.numAttrs = (cluster.x | cluster.y | cluster.z) ? 1 : 0;
  int clusters = -1;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kKernels[kernel].fn, &config);
  Fields r;
  r.str("result", cudaGetErrorName(e));
  if (e == cudaSuccess) r.num("clusters", clusters);
  call.done(r.str("last", last_error()));
}


// ------------------------------------------------------------------------------------------
// the plan: every call, in order, as a closure over its arguments

using Step = std::function<void(long long)>;

constexpr int KIB = 1024;

dim3 pick_block(Rng& rng) {
  const unsigned threads[] = {1, 32, 64, 96, 128, 256, 384, 385, 512, 768, 1024};
  unsigned t = rng.chance(70) ? rng.pick(threads) : static_cast<unsigned>(rng.range(1, 1024));
  dim3 b(t, 1, 1);
  if (rng.chance(25)) {
    const unsigned ys[] = {1, 2, 4, 8};
    const unsigned y = rng.pick(ys), z = rng.chance(50) ? 1 : 2;
    b = dim3(std::max(1u, t / (y * z)), y, z);
  }
  if (rng.chance(15)) {
    const dim3 edges[] = {dim3(1025, 1, 1), dim3(1, 1025, 1), dim3(1, 1, 64), dim3(1, 1, 65), dim3(0, 1, 1),
                          dim3(32, 32, 2), dim3(1024, 1, 1), dim3(16, 16, 4), dim3(16, 16, 5), dim3(1, 1024, 1)};
    b = rng.pick(edges);
  }
  return b;
}

long long pick_smem(Rng& rng) {
  const long long values[] = {0,          0,          1024,       48 * KIB - 8192, 48 * KIB - 8191, 48 * KIB,
                              48 * KIB + 1, g.optin / 2, g.optin - 8192, g.optin - 8191, g.optin,  g.optin + 1,
                              228 * KIB};
  return rng.chance(85) ? rng.pick(values) : rng.range(0, g.optin + 1024);
}

dim3 pick_cluster(Rng& rng) {
  const unsigned sizes[] = {1, 1, 1, 2, 2, 4, 8, 16, 3, 32};
  dim3 c(rng.pick(sizes), 1, 1);
  if (rng.chance(30)) c.y = rng.pick(sizes);
  if (rng.chance(10)) c.z = rng.pick(sizes);
  return c;
}

dim3 grid_for(Rng& rng, dim3 cluster) {
  dim3 grid(static_cast<unsigned>(rng.range(1, 264)), static_cast<unsigned>(rng.range(1, 4)), static_cast<unsigned>(rng.range(1, 2)));
  if (cluster.x && rng.chance(70)) {
    grid = dim3(cluster.x * static_cast<unsigned>(rng.range(1, 8)), std::max(1u, cluster.y) * static_cast<unsigned>(rng.range(1, 2)),
                std::max(1u, cluster.z));
  }
  if (rng.chance(12)) {
    const dim3 edges[] = {dim3(0, 1, 1), dim3(1, 65535, 1), dim3(1, 65536, 1), dim3(1, 1, 65535), dim3(1, 1, 65536),
                          dim3(2147483648u, 1, 1), dim3(2, 0, 1), dim3(4294967295u, 1, 1)};
    grid = rng.pick(edges);
  }
  return grid;
}

LaunchArgs random_launch(Rng& rng) {
  LaunchArgs a;
  const uint64_t api = rng.below(10);
  a.api = api < 7 ? "cudaLaunchKernelExC" : api < 9 ? "cudaLaunchKernel" : "cudaLaunchCooperativeKernel";
  a.kernel = static_cast<int>(rng.below(kKernelCount));
  a.block = pick_block(rng);
  a.smem = pick_smem(rng);
  if (api < 7 && rng.chance(55)) a.cluster = pick_cluster(rng);
  if (api < 7 && rng.chance(10)) a.cooperative = true;
  a.grid = grid_for(rng, a.cluster);
  return a;
}

void add_random_attribute(Rng& rng, std::vector<Step>& plan) {
  const int targets[] = {3, 3, 3, 4, 5, 6};  // k_attr mostly; never the kernels whose state setup() fixes
  const int kernel = rng.pick(targets);
  const int attrs[] = {8, 8, 8, 9, 9, 10, 11, 12, 13, 14, 14, 15, 0, 99};
  const int attr = rng.pick(attrs);
  int value = 0;
  switch (attr) {
    case 8: {
      const int v[] = {-1, 0, 1024, 48 * KIB, g.optin - 8192, g.optin - 8191, g.optin, g.optin + 1, 228 * KIB};
      value = rng.chance(85) ? rng.pick(v) : static_cast<int>(rng.range(0, g.optin + 1024));
      break;
    }
    case 9: {
      const int v[] = {-2, -1, 0, 25, 50, 100, 101};
      value = rng.pick(v);
      break;
    }
    case 11: case 12: case 13: {
      const int v[] = {-1, 0, 1, 2, 3, 4, 8, 16};
      value = rng.pick(v);
      break;
    }
    default: {
      const int v[] = {-1, 0, 1, 2, 3};
      value = rng.pick(v);
    }
  }
  plan.push_back([=](long long i) { set_attribute(i, kernel, attr, value); });
  if (rng.chance(40)) plan.push_back([=](long long i) { func_attributes(i, kernel); });
}

void add_random_occupancy(Rng& rng, std::vector<Step>& plan) {
  const int kernel = static_cast<int>(rng.below(kKernelCount));
  const long long smem = pick_smem(rng);
  if (rng.chance(50)) {
    const int blocks[] = {0, 1, 32, 64, 128, 256, 384, 385, 512, 1024, 1025};
    const int block = rng.chance(80) ? rng.pick(blocks) : static_cast<int>(rng.range(1, 1024));
    plan.push_back([=](long long i) { occupancy_blocks(i, kernel, block, smem); });
  } else {
    const dim3 cluster = rng.chance(90) ? pick_cluster(rng) : dim3(0, 0, 0);
    const dim3 block = pick_block(rng);
    const dim3 grid = grid_for(rng, cluster);
    plan.push_back([=](long long i) { occupancy_clusters(i, kernel, grid, block, smem, cluster); });
  }
}

void add_map(std::vector<Step>& plan, const TensorMapArgs& a) {
  plan.push_back([=](long long i) { encode(i, a); });
}

void entry_point(long long i, const char* symbol, void** out) {
  Call call(i, "cudaGetDriverEntryPointByVersion", Fields().str("symbol", symbol).num("version", 12000));
  cudaDriverEntryPointQueryResult status{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, out, 12000, cudaEnableDefault, &status);
  if (call.live()) call.done(Fields().str("result", cudaGetErrorName(e)).num("status", status).flag("found", *out != nullptr));
}

// Calls chosen by hand: each documented bound at and past its edge, every enumerator, and the
// combinations CUTLASS uses. Their arguments come from their own generator (fixed seed), so
// they do not change with SEED.
void add_edges(std::vector<Step>& plan) {
  Rng rng{0x5eedull};
  plan.push_back([](long long i) { entry_point(i, "cuTensorMapEncodeTiled", reinterpret_cast<void**>(&g.tiled)); });
  plan.push_back([](long long i) { entry_point(i, "cuTensorMapEncodeIm2col", reinterpret_cast<void**>(&g.im2col)); });
  const int optin = g.optin;
  plan.push_back([=](long long i) { set_attribute(i, 1, cudaFuncAttributeMaxDynamicSharedMemorySize, optin); });
  plan.push_back([=](long long i) { set_attribute(i, 2, cudaFuncAttributeMaxDynamicSharedMemorySize, optin); });
  plan.push_back([](long long i) { set_attribute(i, 2, cudaFuncAttributeNonPortableClusterSizeAllowed, 1); });
  for (int k = 0; k < kKernelCount; ++k) plan.push_back([=](long long i) { func_attributes(i, k); });

  // tensor maps: every type at every rank, every interleave x swizzle, every L2 promotion x fill
  for (int type = 0; type < 16; ++type) {
    for (unsigned rank = 0; rank <= 6; ++rank) {
      const int swizzle = packed16(type) ? 3 : 0;
      TensorMapArgs a = valid_map(rng, false, type, rank == 0 || rank == 6 ? 2 : rank, 0, swizzle);
      a.rank = rank;
      add_map(plan, a);
    }
  }
  for (int type = 0; type < 16; ++type) {
    for (int interleave = 0; interleave <= 2; ++interleave) {
      for (int swizzle = 0; swizzle <= 6; ++swizzle) add_map(plan, valid_map(rng, false, type, 3, interleave, swizzle));
    }
    for (int l2 = 0; l2 <= 3; ++l2) {
      for (int oob = 0; oob <= 1; ++oob) {
        TensorMapArgs a = valid_map(rng, false, type, 2, 0, packed16(type) ? 3 : 0);
        a.l2 = l2;
        a.oob = oob;
        add_map(plan, a);
      }
    }
    // NULL global address, as CUTLASS's placeholder descriptors (issue 18): tiled and im2col
    for (unsigned rank = 1; rank <= 3; ++rank) {
      TensorMapArgs a = valid_map(rng, false, type, rank, 0, packed16(type) ? 3 : 0);
      a.addr_kind = "null";
      add_map(plan, a);
    }
    TensorMapArgs n = valid_map(rng, true, type, 3, 0, packed16(type) ? 3 : 0);
    n.addr_kind = "null";
    add_map(plan, n);
  }
  // enumerators past their last value
  for (int bad = 0; bad < 6; ++bad) {
    TensorMapArgs a = valid_map(rng, false, 9, 2, 0, 0);
    if (bad == 0) a.type = 16;
    if (bad == 1) a.interleave = 3;
    if (bad == 2) a.swizzle = 7;
    if (bad == 3) a.l2 = 4;
    if (bad == 4) a.oob = 2;
    if (bad == 5) a.type = -1;
    add_map(plan, a);
  }
  // address alignment, device and host memory, and the tensor map's own alignment
  const int kinds[][3] = {{9, 0, 3}, {9, 2, 1}, {14, 0, 3}, {15, 0, 3}, {13, 0, 0}, {0, 1, 0}};
  for (const auto& k : kinds) {
    for (const long long offset : kAddrOffsets) {
      for (const char* where : {"device", "host", "device_far"}) {
        TensorMapArgs a = valid_map(rng, false, k[0], 3, k[1], k[2]);
        a.addr_kind = where;
        a.addr_offset = offset;
        add_map(plan, a);
      }
    }
  }
  for (const int offset : {8, 16, 32, 48}) {
    TensorMapArgs a = valid_map(rng, false, 9, 2, 0, 3);
    a.map_offset = offset;
    add_map(plan, a);
  }
  // each bound at each dimension
  for (unsigned k = 0; k < 5; ++k) {
    for (const uint64_t d : kDimEdges) {
      TensorMapArgs a = valid_map(rng, false, 9, 5, 0, 0);
      a.dims[k] = d;
      add_map(plan, a);
    }
    for (const uint64_t b : kBoxEdges) {
      TensorMapArgs a = valid_map(rng, false, 9, 5, 0, 0);
      a.box[k] = b;
      add_map(plan, a);
    }
    for (const uint64_t e : kEstrEdges) {
      TensorMapArgs a = valid_map(rng, false, 9, 5, 0, 0);
      a.estr[k] = e;
      add_map(plan, a);
    }
    if (k < 4) {
      for (const uint64_t s : kStrideEdges) {
        TensorMapArgs a = valid_map(rng, false, 9, 5, 0, 0);
        a.strides[k] = s;
        add_map(plan, a);
      }
    }
  }
  // strides smaller than the row they step over (cuda.h's "globalStrides[i] >= globalDim[i]")
  for (const uint64_t inner : {16ull, 64ull, 1024ull}) {
    TensorMapArgs a = valid_map(rng, false, 9, 2, 0, 0);
    a.dims[0] = 4096;
    a.strides[0] = inner;
    add_map(plan, a);
  }
  // the packed types' own rules
  for (int type = 13; type <= 15; ++type) {
    for (const uint64_t d : {1ull, 2ull, 3ull, 64ull, 127ull, 128ull, 129ull, 256ull}) {
      TensorMapArgs a = valid_map(rng, false, type, 2, 0, packed16(type) ? 3 : 0);
      a.dims[0] = d;
      add_map(plan, a);
    }
    for (const uint64_t b : {16ull, 32ull, 64ull, 96ull, 127ull, 128ull, 129ull, 256ull}) {
      TensorMapArgs a = valid_map(rng, false, type, 2, 0, packed16(type) ? 3 : 0);
      a.box[0] = b;
      add_map(plan, a);
    }
    for (const uint64_t s : {16ull, 32ull, 48ull, 64ull}) {
      TensorMapArgs a = valid_map(rng, false, type, 2, 0, packed16(type) ? 3 : 0);
      a.strides[0] = s;
      a.dims[0] = packed16(type) ? 128 : 32;
      add_map(plan, a);
    }
  }
  // im2col: ranks, corner ranges per rank, channels and pixels
  for (int type = 0; type < 16; ++type) {
    for (unsigned rank = 2; rank <= 6; ++rank) {
      TensorMapArgs a = valid_map(rng, true, type, rank < 3 || rank > 5 ? 3 : rank, 0, packed16(type) ? 3 : 0);
      a.rank = rank;
      add_map(plan, a);
    }
  }
  for (unsigned rank = 3; rank <= 5; ++rank) {
    for (const int64_t c : kCornerEdges) {
      for (int which = 0; which < 2; ++which) {
        TensorMapArgs a = valid_map(rng, true, 9, rank, 0, 0);
        (which ? a.upper : a.lower)[rank - 3] = c;
        add_map(plan, a);
      }
    }
    TensorMapArgs empty = valid_map(rng, true, 9, rank, 0, 0);  // zero-area box
    for (unsigned k = 0; k + 2 < rank; ++k) empty.lower[k] = empty.upper[k] = 0;
    add_map(plan, empty);
  }
  for (const uint64_t v : {0ull, 1ull, 8ull, 64ull, 128ull, 255ull, 256ull, 257ull, 1024ull, 1025ull}) {
    for (const int swizzle : {0, 1, 2, 3}) {
      TensorMapArgs a = valid_map(rng, true, 9, 4, 0, swizzle);
      a.channels = v;
      add_map(plan, a);
      TensorMapArgs b = valid_map(rng, true, 9, 4, 0, swizzle);
      b.pixels = v;
      add_map(plan, b);
    }
  }

  // launches at each bound
  auto add_launch = [&plan](const char* api, int kernel, dim3 grid, dim3 block, long long smem, dim3 cluster,
                            bool cooperative) {
    LaunchArgs a;
    a.api = api;
    a.kernel = kernel;
    a.grid = grid;
    a.block = block;
    a.smem = smem;
    a.cluster = cluster;
    a.cooperative = cooperative;
    plan.push_back([=](long long i) { launch(i, a); });
  };
  const char* ex = "cudaLaunchKernelExC";
  const dim3 none(0, 0, 0);
  for (const char* api : {"cudaLaunchKernelExC", "cudaLaunchKernel", "cudaLaunchCooperativeKernel"}) {
    for (const dim3 block : {dim3(1024), dim3(1025), dim3(1, 1, 64), dim3(1, 1, 65), dim3(1024, 2, 1), dim3(0, 1, 1),
                             dim3(1, 1024, 1), dim3(1, 1025, 1)}) {
      add_launch(api, 0, dim3(1), block, 0, none, false);
    }
    for (const dim3 grid : {dim3(0, 1, 1), dim3(1, 65535, 1), dim3(1, 65536, 1), dim3(1, 1, 65535), dim3(1, 1, 65536),
                            dim3(2147483648u, 1, 1)}) {
      add_launch(api, 0, grid, dim3(32), 0, none, false);
    }
    for (const long long smem : {0ll, 48ll * KIB, 48ll * KIB + 1, g.optin - 8192ll, g.optin - 8191ll,
                                 static_cast<long long>(g.optin), g.optin + 1ll}) {
      for (const int kernel : {0, 1, 5}) add_launch(api, kernel, dim3(1), dim3(32), smem, none, false);
    }
    add_launch(api, 5, dim3(1), dim3(384), 0, none, false);
    add_launch(api, 5, dim3(1), dim3(385), 0, none, false);
    add_launch(api, 6, dim3(1), dim3(256), 0, none, false);
    add_launch(api, 6, dim3(1), dim3(1024), 0, none, false);
    add_launch(api, 4, dim3(4), dim3(128), 0, none, false);
    add_launch(api, 4, dim3(3), dim3(128), 0, none, false);
  }
  add_launch(ex, 0, dim3(2147483647u, 1, 1), dim3(1), 0, none, false);  // the largest grid, accepted
  for (const unsigned c : {1u, 2u, 3u, 4u, 8u, 9u, 16u, 17u, 32u}) {
    for (const int kernel : {0, 2}) {
      add_launch(ex, kernel, dim3(c * 2), dim3(128), 0, dim3(c, 1, 1), false);
      add_launch(ex, kernel, dim3(c * 2 + 1), dim3(128), 0, dim3(c, 1, 1), false);
      add_launch(ex, kernel, dim3(2, c * 2), dim3(128), 0, dim3(1, c, 1), false);
      add_launch(ex, kernel, dim3(1, 1, c), dim3(128), 0, dim3(1, 1, c), false);
    }
  }
  add_launch(ex, 4, dim3(4), dim3(128), 0, dim3(2, 1, 1), false);
  add_launch(ex, 4, dim3(4), dim3(128), 0, dim3(4, 1, 1), false);
  add_launch(ex, 4, dim3(4), dim3(128), 0, dim3(1, 1, 1), false);
  // clusters whose blocks cannot all be resident at once: one block per SM (the opt-in shared
  // memory each) in clusters of 8 and 16, and the cluster-count question for each
  for (const unsigned c : {1u, 2u, 4u, 8u, 16u}) {
    for (const long long smem : {0ll, static_cast<long long>(g.optin / 2), static_cast<long long>(g.optin)}) {
      for (const unsigned threads : {128u, 1024u}) {
        add_launch(ex, 2, dim3(c * 4), dim3(threads), smem, dim3(c, 1, 1), false);
        plan.push_back([=](long long i) { occupancy_clusters(i, 2, dim3(c * 4), dim3(threads), smem, dim3(c, 1, 1)); });
      }
    }
  }
  // cooperative grids at and past co-residence
  for (const unsigned grid : {1u, 132u, 264u, 528u, 4224u, 4225u, 8448u, 100000u}) {
    for (const int kernel : {0, 5, 6}) {
      const dim3 block = kernel == 5 ? dim3(384) : dim3(256);
      add_launch("cudaLaunchCooperativeKernel", kernel, dim3(grid), block, 0, none, false);
      add_launch(ex, kernel, dim3(grid), block, 0, none, true);
    }
  }
  for (const unsigned grid : {8u, 132u, 264u, 1056u, 1057u}) add_launch(ex, 2, dim3(grid), dim3(128), g.optin, dim3(8, 1, 1), true);
  // cudaFuncSetAttribute edges
  for (const int kernel : {3, 5}) {
    for (const int v : {-1, 0, 48 * KIB, g.optin - 8192, g.optin - 8191, g.optin, g.optin + 1}) {
      plan.push_back([=](long long i) { set_attribute(i, kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v); });
      plan.push_back([=](long long i) { func_attributes(i, kernel); });
    }
  }
  for (const int attr : {9, 10, 11, 12, 13, 14, 15, 0, 1, 7, 16, 99}) {
    for (const int v : {-2, -1, 0, 1, 2, 3, 8, 16, 100, 101}) {
      for (const int kernel : {3, 4}) {
        plan.push_back([=](long long i) { set_attribute(i, kernel, attr, v); });
      }
    }
    plan.push_back([](long long i) { func_attributes(i, 3); });
    plan.push_back([](long long i) { func_attributes(i, 4); });
    for (const int kernel : {3, 4}) {  // back to the defaults for what follows
      plan.push_back([=](long long i) { set_attribute(i, kernel, attr, attr == 9 ? -1 : 0); });
    }
  }
  // occupancy at each bound
  for (int kernel = 0; kernel < kKernelCount; ++kernel) {
    for (const int block : {0, 1, 32, 128, 256, 384, 385, 512, 1024, 1025}) {
      for (const long long smem : {0ll, 48ll * KIB, static_cast<long long>(g.optin / 3), static_cast<long long>(g.optin),
                                   g.optin + 1ll}) {
        plan.push_back([=](long long i) { occupancy_blocks(i, kernel, block, smem); });
      }
    }
  }
}

void add_generated(std::vector<Step>& plan, uint64_t seed, long long count) {
  Rng rng{seed};
  const size_t end = plan.size() + static_cast<size_t>(count);
  while (plan.size() < end) {
    const uint64_t kind = rng.below(100);
    if (kind < 45) add_map(plan, random_map(rng, false));
    else if (kind < 60) add_map(plan, random_map(rng, true));
    else if (kind < 80) {
      const LaunchArgs a = random_launch(rng);
      plan.push_back([=](long long i) { launch(i, a); });
    } else if (kind < 88) add_random_attribute(rng, plan);
    else add_random_occupancy(rng, plan);
  }
  plan.resize(end);
}

void header(uint64_t seed, long long count, long long edges) {
  int driver = 0, runtime = 0, sms = 0, major = 0, minor = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  Fields f;
  f.num("probe_version", kVersion).num("seed", static_cast<long long>(seed)).num("generated", count).num("edges", edges);
  f.str("gpu", prop.name).str("cc", (std::to_string(major) + "." + std::to_string(minor)).c_str()).num("sm_count", sms);
  f.num("smem_optin", g.optin).num("driver_version", driver).num("runtime_version", runtime);
  f.str("nvcc", (std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__) + "." +
                 std::to_string(__CUDACC_VER_BUILD__)).c_str());
  std::printf("{\"header\":{%s}}\n", f.body.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s SEED COUNT [FROM]\n", argv[0]);
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 0);
  const long long count = std::strtoll(argv[2], nullptr, 10);
  g_from = argc == 4 ? std::strtoll(argv[3], nullptr, 10) : 0;
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&g.base, 2 << 20) != cudaSuccess) {
    std::fprintf(stderr, "probe: no usable CUDA device\n");
    return 3;
  }
  static unsigned char host[4096 + 256];
  g.host = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(host) + 255) & ~uintptr_t{255});
  cudaDeviceGetAttribute(&g.optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  std::vector<Step> plan;
  add_edges(plan);
  const long long edges = static_cast<long long>(plan.size());
  add_generated(plan, seed, count);
  if (g_from == 0) header(seed, count, edges);
  // Calls before FROM print nothing; those that leave state behind (entry points, function
  // attributes) are still made.
  for (size_t i = 0; i < plan.size(); ++i) plan[i](static_cast<long long>(i));
  cudaFree(g.base);
  return 0;
}
