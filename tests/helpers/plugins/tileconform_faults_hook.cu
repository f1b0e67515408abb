// The faults of tileconform_faults.py, as a harness hook library (harness/tileconform_hook.h).
// Each fault adds work at the hook's points; the harness does what it always does.
//
//   trap              a kernel executing __trap() after the checked run's GEMM: a sticky error,
//                     the case fails at run and the runner must be started again
//   uninit-workspace  after every GEMM, a kernel ORs the workspace's last bytes into D's first
//                     ones, as a kernel computing from workspace memory nobody wrote: with a
//                     zeroed workspace D would not change, with the harness's poison it is NaN
//   unwritten-d       after every GEMM, D is set back to what it held before the run, as if the
//                     kernel wrote none of it
//   race              from the second launcher call on (after warm-up: the graph capture or
//                     the first repeat), a kernel on a second stream, forked before the GEMM and
//                     joined after it without any order between the two, writes into D after
//                     ~2 ms: it races the GEMM and, given the GEMM's microseconds, wins late
//   workspace-race    from the second launcher call on, a kernel on a second stream, forked
//                     before the GEMM and joined after it, keeps writing the poison over the
//                     whole CUTLASS workspace while the GEMM runs, as another GEMM on the same
//                     workspace would rewrite the TMA descriptors this one reads (FlashInfer's
//                     GEMM 1 and GEMM 2 share it); run with the graph and repeat stages off, the
//                     calls after the checked run are the sequence stage's
//   pending-error     before the case, a failed cudaMalloc in the harness's own runtime leaves
//                     a pending (non-sticky) error: the case fails at prepare
//   pending-after     the same after the case's last stage, as a launcher call that left an
//                     error nobody checked: the case fails at run
//   scale-d:TYPE      after every GEMM, each element of D (of TYPE: bf16, fp16 or fp32) is
//                     multiplied by 1.01 and rounded to nearest in TYPE, as a kernel with a
//                     scale 1% off writes it: every D changes value (finite, no poison)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>

#include "tileconform_hook.h"

namespace {

__global__ void trap_kernel() { __trap(); }

__global__ void or_workspace_into_d(unsigned char* d, const unsigned char* tail, size_t n) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) d[i] |= tail[i];
}

__global__ void late_writer(unsigned char* d, size_t n) {
  for (int i = 0; i < 2000; ++i) __nanosleep(1000);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = 0x3C;  // a finite, wrong value
}

// Rewrites the workspace again and again for some tens of microseconds, longer than a smoke
// GEMM runs, so that the GEMM launched beside it reads a workspace being overwritten.
__global__ void scribble_workspace(unsigned char* workspace, size_t n) {
  for (int round = 0; round < 400; ++round) {
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
      workspace[i] = 0xFF;
    __nanosleep(100);
  }
}

constexpr float kScale = 1.01f;

template <typename T>
__global__ void scale_d(T* d, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    d[i] = static_cast<T>(static_cast<float>(d[i]) * kScale);
}

template <typename T>
void launch_scale_d(const TileconformHookContext* c) {
  scale_d<T><<<256, 256, 0, c->stream>>>(static_cast<T*>(c->d), c->d_bytes / sizeof(T));
}

// scale-d:TYPE: D's element type from the ARG (the test plugin writes the case's output type)
void scale_d_as(const TileconformHookContext* c) {
  const char* type = c->arg + std::strlen("scale-d:");
  if (std::strcmp(type, "bf16") == 0) launch_scale_d<__nv_bfloat16>(c);
  if (std::strcmp(type, "fp16") == 0) launch_scale_d<__half>(c);
  if (std::strcmp(type, "fp32") == 0) launch_scale_d<float>(c);
}

cudaStream_t side = nullptr;
cudaEvent_t fork_event = nullptr, join_event = nullptr;

bool is(const TileconformHookContext* c, const char* kind) { return std::strcmp(c->arg, kind) == 0; }

}  // namespace

extern "C" void tileconform_hook(const TileconformHookContext* c) {
  if (c->version != TILECONFORM_HOOK_VERSION) return;
  const size_t head = c->d_bytes < 256 ? c->d_bytes : 256;
  switch (c->point) {
    case TILECONFORM_HOOK_BEFORE_CASE:
      if (is(c, "pending-error")) {
        void* never = nullptr;
        c->runtime_malloc(&never, size_t{1} << 62);
      }
      if ((is(c, "race") || is(c, "workspace-race")) && side == nullptr) {  // made before any capture: creating is no capture
        cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming);
        cudaEventCreateWithFlags(&join_event, cudaEventDisableTiming);
      }
      break;
    case TILECONFORM_HOOK_BEFORE_LAUNCH:
      if (is(c, "race") && c->call >= 1) {
        cudaEventRecord(fork_event, c->stream);
        cudaStreamWaitEvent(side, fork_event, 0);
        late_writer<<<1, 256, 0, side>>>(static_cast<unsigned char*>(c->d), head);
      }
      if (is(c, "workspace-race") && c->call >= 1 && c->workspace_bytes > 0) {
        cudaEventRecord(fork_event, c->stream);
        cudaStreamWaitEvent(side, fork_event, 0);
        scribble_workspace<<<2, 256, 0, side>>>(static_cast<unsigned char*>(c->workspace), c->workspace_bytes);
      }
      break;
    case TILECONFORM_HOOK_AFTER_LAUNCH:
      if (is(c, "trap") && c->call == 0) trap_kernel<<<1, 1, 0, c->stream>>>();
      if (is(c, "uninit-workspace") && c->workspace_bytes > 0) {
        const size_t n = head < c->workspace_bytes ? head : c->workspace_bytes;
        const auto* tail = static_cast<const unsigned char*>(c->workspace) + c->workspace_bytes - n;
        or_workspace_into_d<<<1, 256, 0, c->stream>>>(static_cast<unsigned char*>(c->d), tail, n);
      }
      if (is(c, "unwritten-d")) cudaMemsetAsync(c->d, c->d_initial_byte, c->d_bytes, c->stream);
      if (std::strncmp(c->arg, "scale-d:", std::strlen("scale-d:")) == 0) scale_d_as(c);
      if ((is(c, "race") || is(c, "workspace-race")) && c->call >= 1) {
        cudaEventRecord(join_event, side);
        cudaStreamWaitEvent(c->stream, join_event, 0);
      }
      break;
    case TILECONFORM_HOOK_AFTER_CASE:
      if (is(c, "pending-after")) {
        void* never = nullptr;
        c->runtime_malloc(&never, size_t{1} << 62);
      }
      break;
  }
}
