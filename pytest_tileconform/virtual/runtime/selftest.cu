// Self-test of the virtual runtime: host-side CUDA decisions, one JSON object per line.
//
// Built twice from this one file: against the real cudart (run on a GPU) and against vcudart
// (run anywhere with that GPU's profile). Both must print the same lines; that is how the
// error codes vcudart returns were pinned to the real runtime's (tests/test_virtual_runtime.py
// holds the lines an H200 printed). Every kernel here is harmless if it does run.

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

__global__ void __launch_bounds__(384, 1) k_static(float* p) {
  __shared__ float s[2048];  // 8 KiB static shared memory
  s[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = s[(threadIdx.x + 1) % 384];
}

__global__ void k_dyn(float* p) {
  extern __shared__ float d[];
  d[threadIdx.x] = p[threadIdx.x % 32];
  __syncthreads();
  if (threadIdx.x == 0) p[0] = d[blockDim.x - 1];
}

__global__ void k_dyn_default(float* p) {
  extern __shared__ float d[];
  d[threadIdx.x] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) p[0] = d[0];
}

__global__ void k_plain(float* p) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[0] = 1.f;
}

__global__ void k_nonportable(float* p) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[0] = 2.f;
}

__global__ void __cluster_dims__(2, 1, 1) k_cluster2(float* p) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[0] = 3.f;
}

// Keeps many values live at once so that ptxas needs well over 64 registers per thread.
__global__ void k_regs(float* p, int n) {
  float v[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) v[i] = p[(threadIdx.x * 97 + i * 31) % n];
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) {
#pragma unroll
    for (int j = i + 1; j < 96; j += 7) acc += v[i] * v[j];
  }
  if (acc == 12345.f) p[threadIdx.x % n] = acc;
}

void line(const char* check, cudaError_t result) {
  std::printf("{\"check\": \"%s\", \"result\": \"%s\"}\n", check, cudaGetErrorName(result));
}

void value(const char* check, long long v) { std::printf("{\"check\": \"%s\", \"value\": %lld}\n", check, v); }

// A launch's verdict: the launch's own error, then what the stream reports.
void launched(const char* check, cudaError_t launch_result) {
  const cudaError_t last = cudaGetLastError();
  cudaDeviceSynchronize();
  std::printf("{\"check\": \"%s\", \"result\": \"%s\", \"last_error\": \"%s\"}\n", check,
              cudaGetErrorName(launch_result), cudaGetErrorName(last));
}

// cudaLaunchKernelExC, as CUTLASS launches; a zero cluster means no cluster attribute.
cudaError_t launch_ex(const void* kernel, dim3 grid, dim3 block, size_t smem, dim3 cluster, float* p) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster.x;
  attr[0].val.clusterDim.y = cluster.y;
  attr[0].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.attrs = attr;
  config.numAttrs = cluster.x * cluster.y * cluster.z > 0 ? 1 : 0;
  void* args[] = {&p};
  return cudaLaunchKernelExC(&config, kernel, args);
}

void device_attributes() {
  const struct {
    const char* name;
    cudaDeviceAttr attr;
  } attrs[] = {
      {"attr.MultiProcessorCount", cudaDevAttrMultiProcessorCount},
      {"attr.ComputeCapabilityMajor", cudaDevAttrComputeCapabilityMajor},
      {"attr.ComputeCapabilityMinor", cudaDevAttrComputeCapabilityMinor},
      {"attr.MaxSharedMemoryPerBlock", cudaDevAttrMaxSharedMemoryPerBlock},
      {"attr.MaxSharedMemoryPerBlockOptin", cudaDevAttrMaxSharedMemoryPerBlockOptin},
      {"attr.MaxSharedMemoryPerMultiprocessor", cudaDevAttrMaxSharedMemoryPerMultiprocessor},
      {"attr.ReservedSharedMemoryPerBlock", cudaDevAttrReservedSharedMemoryPerBlock},
      {"attr.MaxRegistersPerBlock", cudaDevAttrMaxRegistersPerBlock},
      {"attr.MaxRegistersPerMultiprocessor", cudaDevAttrMaxRegistersPerMultiprocessor},
      {"attr.MaxThreadsPerBlock", cudaDevAttrMaxThreadsPerBlock},
      {"attr.MaxThreadsPerMultiProcessor", cudaDevAttrMaxThreadsPerMultiProcessor},
      {"attr.MaxBlocksPerMultiprocessor", cudaDevAttrMaxBlocksPerMultiprocessor},
      {"attr.MaxBlockDimZ", cudaDevAttrMaxBlockDimZ},
      {"attr.MaxGridDimX", cudaDevAttrMaxGridDimX},
      {"attr.MaxGridDimY", cudaDevAttrMaxGridDimY},
      {"attr.WarpSize", cudaDevAttrWarpSize},
      {"attr.ClusterLaunch", cudaDevAttrClusterLaunch},
      {"attr.Integrated", cudaDevAttrIntegrated},
  };
  for (const auto& a : attrs) {
    int v = -1;
    const cudaError_t e = cudaDeviceGetAttribute(&v, a.attr, 0);
    if (e != cudaSuccess) {
      line(a.name, e);
    } else {
      value(a.name, v);
    }
  }
}

void function_attributes(const char* name, const void* kernel) {
  cudaFuncAttributes a{};
  const cudaError_t e = cudaFuncGetAttributes(&a, kernel);
  std::printf(
      "{\"check\": \"funcattr.%s\", \"result\": \"%s\", \"static_smem\": %zu, \"max_dynamic_smem\": %d, "
      "\"max_threads\": %d, \"registers_over_64\": %s, \"required_cluster_width\": %d}\n",
      name, cudaGetErrorName(e), a.sharedSizeBytes, a.maxDynamicSharedSizeBytes, a.maxThreadsPerBlock,
      a.numRegs > 64 ? "true" : "false", a.requiredClusterWidth);
}

void shared_memory_limits(float* p) {
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  const void* dyn = reinterpret_cast<const void*>(&k_dyn);
  const void* stat = reinterpret_cast<const void*>(&k_static);
  // Defaults first: 48 KiB in all, static included.
  launched("launch.static.dynamic_over_default",
           (k_static<<<1, 32, 48 * 1024 - 8192 + 16>>>(p), cudaPeekAtLastError()));
  launched("launch.static.dynamic_at_default", (k_static<<<1, 32, 48 * 1024 - 8192>>>(p), cudaPeekAtLastError()));
  line("smem.dyn.optin", cudaFuncSetAttribute(dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  line("smem.dyn.negative", cudaFuncSetAttribute(dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, -1));
  cudaGetLastError();
  line("smem.dyn.optin+1", cudaFuncSetAttribute(dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1));
  cudaGetLastError();
  line("smem.static.optin-8192", cudaFuncSetAttribute(stat, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 8192));
  line("smem.static.optin-8191", cudaFuncSetAttribute(stat, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 8191));
  cudaGetLastError();
  // k_dyn now allows `optin` bytes of dynamic shared memory; k_dyn_default still has the default.
  launched("launch.dyn.optin", (k_dyn<<<1, 32, optin>>>(p), cudaPeekAtLastError()));
  launched("launch.dyn_default.48K", (k_dyn_default<<<1, 32, 48 * 1024>>>(p), cudaPeekAtLastError()));
  launched("launch.dyn_default.48K+1", (k_dyn_default<<<1, 32, 48 * 1024 + 1>>>(p), cudaPeekAtLastError()));
}

void launch_limits(float* p) {
  launched("launch.plain.1024", (k_plain<<<1, 1024>>>(p), cudaPeekAtLastError()));
  launched("launch.plain.1025", (k_plain<<<1, 1025>>>(p), cudaPeekAtLastError()));
  launched("launch.plain.blockz65", (k_plain<<<1, dim3(1, 1, 65)>>>(p), cudaPeekAtLastError()));
  launched("launch.plain.gridy65536", (k_plain<<<dim3(1, 65536, 1), 32>>>(p), cudaPeekAtLastError()));
  launched("launch.plain.grid0", (k_plain<<<0, 32>>>(p), cudaPeekAtLastError()));
  launched("launch.static.384", (k_static<<<1, 384>>>(p), cudaPeekAtLastError()));
  launched("launch.static.385_over_launch_bounds", (k_static<<<1, 385>>>(p), cudaPeekAtLastError()));
  launched("launch.regs.1024", (k_regs<<<1, 1024>>>(p, 4096), cudaPeekAtLastError()));
  launched("launch.regs.256", (k_regs<<<1, 256>>>(p, 4096), cudaPeekAtLastError()));
  const void* plain = reinterpret_cast<const void*>(&k_plain);
  const void* stat = reinterpret_cast<const void*>(&k_static);
  const void* dyn_default = reinterpret_cast<const void*>(&k_dyn_default);
  const dim3 no_cluster(0, 0, 0);
  launched("launchex.plain.1025", launch_ex(plain, dim3(1), dim3(1025), 0, no_cluster, p));
  launched("launchex.plain.grid0", launch_ex(plain, dim3(0), dim3(32), 0, no_cluster, p));
  launched("launchex.static.385_over_launch_bounds", launch_ex(stat, dim3(1), dim3(385), 0, no_cluster, p));
  launched("launchex.dyn_default.48K+1", launch_ex(dyn_default, dim3(1), dim3(32), 48 * 1024 + 1, no_cluster, p));
  void* args[] = {&p};
  launched("launchkernel.plain.1025", cudaLaunchKernel(plain, dim3(1), dim3(1025), args, 0, nullptr));
  launched("launchkernel.static.385_over_launch_bounds",
           cudaLaunchKernel(stat, dim3(1), dim3(385), args, 0, nullptr));
}

void cluster_limits(float* p) {
  const void* plain = reinterpret_cast<const void*>(&k_plain);
  const void* nonportable = reinterpret_cast<const void*>(&k_nonportable);
  const void* cluster2 = reinterpret_cast<const void*>(&k_cluster2);
  launched("cluster.2x1x1.grid4", launch_ex(plain, dim3(4), dim3(128), 0, dim3(2, 1, 1), p));
  launched("cluster.2x1x1.grid3", launch_ex(plain, dim3(3), dim3(128), 0, dim3(2, 1, 1), p));
  launched("cluster.8x1x1.grid16", launch_ex(plain, dim3(16), dim3(128), 0, dim3(8, 1, 1), p));
  launched("cluster.16x1x1.portable", launch_ex(plain, dim3(16), dim3(128), 0, dim3(16, 1, 1), p));
  line("cluster.set_nonportable",
       cudaFuncSetAttribute(nonportable, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  launched("cluster.16x1x1.nonportable", launch_ex(nonportable, dim3(16), dim3(128), 0, dim3(16, 1, 1), p));
  launched("cluster.32x1x1.nonportable", launch_ex(nonportable, dim3(32), dim3(128), 0, dim3(32, 1, 1), p));
  launched("cluster.compiletime.grid4", (k_cluster2<<<4, 128>>>(p), cudaPeekAtLastError()));
  launched("cluster.compiletime.grid3", (k_cluster2<<<3, 128>>>(p), cudaPeekAtLastError()));
  launched("cluster.compiletime.mismatch", launch_ex(cluster2, dim3(4), dim3(128), 0, dim3(4, 1, 1), p));
  line("cluster.compiletime.set_width",
       cudaFuncSetAttribute(cluster2, cudaFuncAttributeRequiredClusterWidth, 4));
  cudaGetLastError();
}

void cooperative_limits(float* p) {
  void* args[] = {&p};
  const void* stat = reinterpret_cast<const void*>(&k_static);
  launched("cooperative.grid1", cudaLaunchCooperativeKernel(stat, dim3(1), dim3(384), args, 0, nullptr));
  launched("cooperative.grid100000",
           cudaLaunchCooperativeKernel(stat, dim3(100000), dim3(384), args, 0, nullptr));
}

void tensor_maps(float* p) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  line("tma.entry_point", cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                           cudaEnableDefault, &status));
  value("tma.entry_point.status", status);
  auto encode = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(fn);
  char* base = reinterpret_cast<char*>(p);  // cudaMalloc: 256-byte aligned, 1 MiB
  struct Case {
    const char* name;
    CUtensorMapDataType type;
    cuuint32_t rank;
    size_t offset;
    cuuint64_t dims[2];
    cuuint64_t stride;
    cuuint32_t box[2];
    cuuint32_t elem_stride;
    CUtensorMapInterleave interleave;
    CUtensorMapSwizzle swizzle;
  };
  const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const auto none = CU_TENSOR_MAP_INTERLEAVE_NONE;
  const auto sw128 = CU_TENSOR_MAP_SWIZZLE_128B;
  const Case cases[] = {
      {"tma.valid", bf16, 2, 0, {256, 256}, 512, {64, 64}, 1, none, sw128},
      {"tma.address_plus_8", bf16, 2, 8, {256, 256}, 512, {64, 64}, 1, none, sw128},
      {"tma.address_plus_16", bf16, 2, 16, {256, 256}, 512, {64, 64}, 1, none, sw128},
      {"tma.stride_500", bf16, 2, 0, {250, 256}, 500, {64, 64}, 1, none, sw128},
      {"tma.box_257", bf16, 2, 0, {256, 512}, 512, {64, 257}, 1, none, CU_TENSOR_MAP_SWIZZLE_NONE},
      {"tma.box_inner_4_elements", bf16, 2, 0, {256, 256}, 512, {4, 64}, 1, none, CU_TENSOR_MAP_SWIZZLE_NONE},
      {"tma.swizzle64_inner_128B", bf16, 2, 0, {256, 256}, 512, {64, 64}, 1, none, CU_TENSOR_MAP_SWIZZLE_64B},
      {"tma.swizzle128_inner_256B", bf16, 2, 0, {256, 256}, 512, {128, 64}, 1, none, sw128},
      {"tma.element_stride_9", bf16, 2, 0, {256, 256}, 512, {64, 64}, 9, none, sw128},
      {"tma.rank_0", bf16, 0, 0, {256, 256}, 512, {64, 64}, 1, none, sw128},
      {"tma.interleave32_rank2", bf16, 2, 0, {256, 256}, 512, {64, 64}, 1, CU_TENSOR_MAP_INTERLEAVE_32B,
       CU_TENSOR_MAP_SWIZZLE_32B},
      {"tma.dim_zero", bf16, 2, 0, {0, 256}, 512, {64, 64}, 1, none, sw128},
  };
  for (const Case& c : cases) {
    alignas(64) CUtensorMap map;
    const cuuint32_t elem_strides[2] = {c.elem_stride, c.elem_stride};
    const CUresult r = encode(&map, c.type, c.rank, base + c.offset, c.dims, &c.stride, c.box, elem_strides,
                              c.interleave, c.swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    std::printf("{\"check\": \"%s\", \"result\": \"%s\"}\n", c.name,
                r == CUDA_SUCCESS ? "CUDA_SUCCESS" : r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "other");
  }
}

}  // namespace

int main() {
  int count = 0;
  line("device_count", cudaGetDeviceCount(&count));
  value("device_count.value", count);
  float* p = nullptr;
  line("malloc", cudaMalloc(&p, 1 << 20));
  cudaMemset(p, 0, 1 << 20);
  device_attributes();
  function_attributes("static", reinterpret_cast<const void*>(&k_static));
  function_attributes("dyn_default", reinterpret_cast<const void*>(&k_dyn_default));
  function_attributes("regs", reinterpret_cast<const void*>(&k_regs));
  function_attributes("cluster2", reinterpret_cast<const void*>(&k_cluster2));
  shared_memory_limits(p);
  launch_limits(p);
  cluster_limits(p);
  cooperative_limits(p);
  tensor_maps(p);
  line("free", cudaFree(p));
  return 0;
}
