// What every dense GEMM harness shares: how it drives a family's launcher (drive) and what it
// writes into its run directory, verdict.json, read by pytest_tileconform/flashinfer_dense/report.py.
// The harness does not name the stage: it reports whether FlashInfer's launcher returned or threw,
// and what it threw; the backend reads the stage from the launcher's own message. A family's
// harness says only what is its own: its operands' sizes and its launcher call.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <exception>
#include <string>

namespace tileconform_dense {

#ifdef TILECONFORM_CTA_M
// The unit's CTA shape as the CUTLASS launchers of the rendered templates take it.
using CtaM = cute::Int<TILECONFORM_CTA_M>;
using CtaN = cute::Int<TILECONFORM_CTA_N>;
using CtaK = cute::Int<TILECONFORM_CTA_K>;
#endif

inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// outcome: "returned" or "threw"; a missing file means the harness never got that far. stages:
// a JSON object of what later stages did (a hardware harness's run, graph and repeats), or "".
inline int write_verdict(const char* run_dir, const char* outcome, const std::string& message,
                         size_t workspace, const std::string& stages = "") {
  std::string path = std::string(run_dir) + "/verdict.json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return 3;
  std::fprintf(f, "{\"outcome\": \"%s\", \"message\": %s, \"workspace_bytes\": %zu%s%s}\n",
               outcome, json_string(message).c_str(), workspace, stages.empty() ? "" : ", \"stages\": ",
               stages.c_str());
  std::fclose(f);
  return 0;
}

inline size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// The block-scaled families: NVFP4 (e2m1 A and B, two a byte; a ue4m3 scale per 16 along K; an
// fp32 global scale, alpha) and MXFP8 (e4m3 A and B; a ue8m0 scale per 32 along K).
enum class BlockScaled { nvfp4, mxfp8 };

// The bytes of a block-scaled GEMM's operands in the order its launchers take them: A, B, D (Out),
// the scales of A and of B (in 128 x 4 swizzled blocks: rows rounded up to 128, a row's scales to
// 4), and NVFP4's global scale. One place for what every SM100 and SM120 harness of these
// families allocates.
template <typename Out, BlockScaled Kind>
auto block_scaled_bytes(int m, int n, int k) {
  constexpr bool nvfp4 = Kind == BlockScaled::nvfp4;
  size_t mk = static_cast<size_t>(m) * k, nk = static_cast<size_t>(n) * k;
  size_t sf_k = round_up(static_cast<size_t>(k) / (nvfp4 ? 16 : 32), 4);
  size_t d = static_cast<size_t>(m) * n * sizeof(Out);
  if constexpr (nvfp4) {
    return std::array<size_t, 6>{mk / 2, nk / 2, d, round_up(m, 128) * sf_k, round_up(n, 128) * sf_k,
                                 sizeof(float)};
  } else {
    return std::array<size_t, 5>{mk, nk, d, round_up(m, 128) * sf_k, round_up(n, 128) * sf_k};
  }
}

// Drives one tactic's launcher as FlashInfer's runners do: getWorkspaceSize's query (every operand
// null, no workspace), then gemm's call with the operands and that workspace, which runs the
// launcher's get_workspace_size, can_implement, initialize and run. operand_bytes: one device
// buffer per operand, allocated in this order; launch(operands, workspace, workspace_bytes) calls
// the family's launcher with them and returns what it returns (the workspace size).
template <size_t N, typename Launch>
int drive(const char* run_dir, std::array<size_t, N> const& operand_bytes, Launch&& launch) {
  std::array<void*, N> operands{};
  size_t workspace = 0;
  try {
    workspace = launch(operands, static_cast<char*>(nullptr), size_t{0});
  } catch (std::exception const& e) {
    return write_verdict(run_dir, "threw", e.what(), 0);
  }
  char* space = nullptr;
  for (size_t i = 0; i < N; ++i) {
    if (cudaMalloc(&operands[i], operand_bytes[i]) != cudaSuccess) {
      std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
      return 2;
    }
  }
  if (workspace && cudaMalloc(reinterpret_cast<void**>(&space), workspace) != cudaSuccess) {
    std::fprintf(stderr, "harness: cudaMalloc of the operands failed\n");
    return 2;
  }
  try {
    launch(operands, space, workspace);
  } catch (std::exception const& e) {
    return write_verdict(run_dir, "threw", e.what(), workspace);
  }
  if (cudaStreamSynchronize(nullptr) != cudaSuccess) {
    return write_verdict(run_dir, "threw", cudaGetErrorString(cudaGetLastError()), workspace);
  }
  return write_verdict(run_dir, "returned", "", workspace);
}

}  // namespace tileconform_dense
