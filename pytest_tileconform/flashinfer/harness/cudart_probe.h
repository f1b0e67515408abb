// Recording shims for the few CUDA runtime calls through which CUTLASS reports *why* a
// host-side stage failed.
//
// The generated translation unit includes this header before FlashInfer's launcher .inl, so
// every later mention of these names in CUTLASS / TensorRT-LLM headers is redirected here. Each
// shim forwards to the real runtime function unchanged and only records what was asked and
// what came back; device code and host control flow are exactly those of the launcher.
// harness.cu #undefs the redirections again, so its own calls go straight to the runtime.
//
// What is recorded:
//   - smem_requested: the dynamic shared memory CUTLASS asks for, i.e. the value it passes to
//     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) in
//     GemmUniversalAdapter::initialize() (done whenever smem >= 48 KiB), or the
//     dynamicSmemBytes of an extended (cluster / PDL) launch.
//   - cuda_error: the first non-success cudaError_t that one of these calls returned. CUTLASS
//     folds launch and attribute errors into "Error Internal" and clears them with
//     cudaGetLastError(), so this is the only place the real CUDA error name survives.
#pragma once

#include <cuda_runtime.h>

#include <utility>

struct TileconformCudartProbe {
  long long smem_requested = -1;  // -1: CUTLASS never told the runtime its smem size
  cudaError_t first_error = cudaSuccess;
  const char* first_error_call = nullptr;

  void note(cudaError_t result, const char* call) {
    if (result != cudaSuccess && first_error == cudaSuccess) {
      first_error = result;
      first_error_call = call;
    }
  }
};

inline TileconformCudartProbe& tileconform_cudart_probe() {
  static TileconformCudartProbe probe;
  return probe;
}

template <class Kernel>
cudaError_t tileconform_probe_cudaFuncSetAttribute(Kernel* entry, cudaFuncAttribute attr,
                                                   int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    tileconform_cudart_probe().smem_requested = value;
  }
  cudaError_t result = ::cudaFuncSetAttribute((const void*)entry, attr, value);
  tileconform_cudart_probe().note(result, "cudaFuncSetAttribute");
  return result;
}

inline cudaError_t tileconform_probe_cudaLaunchKernelExC(const cudaLaunchConfig_t* config,
                                                        const void* func, void** args) {
  tileconform_cudart_probe().smem_requested = static_cast<long long>(config->dynamicSmemBytes);
  cudaError_t result = ::cudaLaunchKernelExC(config, func, args);
  tileconform_cudart_probe().note(result, "cudaLaunchKernelExC");
  return result;
}

template <class... ExpTypes, class... ActTypes>
cudaError_t tileconform_probe_cudaLaunchKernelEx(const cudaLaunchConfig_t* config,
                                                 void (*kernel)(ExpTypes...), ActTypes&&... args) {
  tileconform_cudart_probe().smem_requested = static_cast<long long>(config->dynamicSmemBytes);
  cudaError_t result = ::cudaLaunchKernelEx(config, kernel, std::forward<ActTypes>(args)...);
  tileconform_cudart_probe().note(result, "cudaLaunchKernelEx");
  return result;
}

inline cudaError_t tileconform_probe_cudaGetLastError() {
  cudaError_t result = ::cudaGetLastError();
  tileconform_cudart_probe().note(result, "cudaGetLastError");
  return result;
}

#define cudaFuncSetAttribute tileconform_probe_cudaFuncSetAttribute
#define cudaLaunchKernelExC tileconform_probe_cudaLaunchKernelExC
#define cudaLaunchKernelEx tileconform_probe_cudaLaunchKernelEx
#define cudaGetLastError tileconform_probe_cudaGetLastError
