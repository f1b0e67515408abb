// Operands in device memory, handed to a case in place of its operand files. The worker makes a
// problem's inputs on the GPU once and shares them with the runner by CUDA IPC (operands.txt in
// the run directory, PROTOCOL.md); the runner maps them into its context (runner.cpp, which
// alone opens IPC handles: a handle may be opened once per process, and each unit links a runtime
// of its own) and calls the unit's tileconform_run_case_on with the mapped addresses.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// One operand: `name` as PROTOCOL.md names its file without ".bin" (a, b, alpha, a_sf, b_sf,
// router_scales, dest_row, bias) or an output buffer the harness writes (d, d_graph, d_repeat).
struct TileconformOperand {
  const char* name;
  void* ptr;
  size_t bytes;
};

// tileconform_run_case with the case's operands in device memory (count > 0) instead of files.
typedef int (*TileconformRunCaseOn)(const char* run_dir, const char* case_name, int* context_lost,
                                    const struct TileconformOperand* operands, int count);

#ifdef __cplusplus
}
#endif
