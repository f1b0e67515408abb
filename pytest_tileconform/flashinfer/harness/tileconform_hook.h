// The harness's hook interface: a shared library named in problem.txt (`hook PATH [ARG]`) is
// loaded by the harness and its `tileconform_hook` is called at fixed points of a case, with
// what a hook needs to act on the case: its stream, D, the workspace and the harness's own CUDA
// runtime entry points. The harness itself never changes what it does because of a hook; a hook
// can only add work (a kernel, a CUDA call) at those points. Tests use it to inject faults
// (tests/plugins/tileconform_faults.py); nothing in the package ships a hook.
//
// A harness unit links its own copy of the CUDA runtime (static cudart), so a hook that must
// change *that* runtime's state (its pending error) calls through `runtime_malloc`; kernels a
// hook launches through its own runtime run in the same CUDA context on `stream`.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILECONFORM_HOOK_VERSION 1

// Where in a case the hook is called.
enum TileconformHookPoint {
  TILECONFORM_HOOK_BEFORE_CASE = 0,    // before the harness looks for a pending CUDA error
  TILECONFORM_HOOK_BEFORE_LAUNCH = 1,  // before each launcher call that computes D
  TILECONFORM_HOOK_AFTER_LAUNCH = 2,   // after each such call returned (its kernel enqueued)
  TILECONFORM_HOOK_AFTER_CASE = 3,     // after the case's last stage, before the verdict
};

struct TileconformHookContext {
  int version;  // TILECONFORM_HOOK_VERSION
  enum TileconformHookPoint point;
  const char* run_dir;
  const char* case_name;
  const char* arg;  // the ARG of problem.txt's hook line ("" without one)
  // Launcher calls that computed D so far in this case (0 at the checked run; the graph capture
  // and every repeat count one each, so does each GEMM of the sequence stage and of its capture;
  // graph replays are not calls).
  int call;
  int capturing;  // the call is being captured into a CUDA graph
  cudaStream_t stream;  // null before the case's stream exists
  void* d;
  size_t d_bytes;
  unsigned char d_initial_byte;  // what D holds before each run (the poison, or 0 for finalize)
  void* workspace;
  size_t workspace_bytes;
  cudaError_t (*runtime_malloc)(void** ptr, size_t bytes);  // the harness's cudaMalloc
};

typedef void (*TileconformHook)(const struct TileconformHookContext* context);

#ifdef __cplusplus
}
#endif
