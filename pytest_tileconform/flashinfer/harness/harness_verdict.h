// The harness's verdict.json and the errors that decide it (part of harness.cu, see there).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tileconform {

// What the harness fills memory with that the kernel is meant to write or that nobody should
// read before writing: the workspace, D without fusion and the per-expert entries TensorRT-LLM
// leaves unset for empty experts. 0xFF bytes are NaN in every float output format and an
// address no allocation has, so an unwritten D fails numerics and a read of an unset pointer
// faults. Python reads it from verdict.json ("poison_byte"), never a copy of its own.
constexpr unsigned char kPoisonByte = 0xFF;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

struct DeviceInfo {
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int max_smem_optin = 0;
};

struct ProblemInfo {
  int experts = 0;
  std::vector<int64_t> rows;
  int64_t n = 0;
  int64_t k = 0;
  int64_t out_rows = 0;
  int timing_iters = 0;
  int graph_replays = 0;  // the graph stage: replays of the captured run (0: no such stage)
  int repeats = 0;        // the repeat stage: further runs after the checked one (0: none)
  int sequence_runs = 0;     // the sequence stage: unsynchronized runs of each kind (0: no stage)
  int sequence_replays = 0;  // and replays of its captured GEMM 1 -> GEMM 2 pair
  bool enable_pdl = false;
  int cluster_shape[2] = {0, 0};           // dynamic CGA: the runtime cluster (M, N)
  int fallback_cluster_shape[2] = {0, 0};  // and its fallback; 0: a static cluster
  bool poison = true;  // false only for compute-sanitizer's initcheck, which must see unset memory
  bool bias = false;   // bias.bin given (finalize: FlashInfer's per-expert bias of GEMM2)
  bool use_reduction = false;  // finalize: several permuted rows share an output row
  std::string hook;            // a hook library (tileconform_hook.h), "" for none
  std::string hook_arg;

  int64_t total_rows() const { return std::accumulate(rows.begin(), rows.end(), int64_t{0}); }
};

// What a stage that runs the case again saw: how many of its runs left D different from the
// checked run's, and the most elements one of them changed (that run's D is saved).
struct ReplayInfo {
  bool ran = false;
  int runs = 0;
  int changed_runs = 0;
  long long most_changed = 0;
  std::string saved;  // file of the run that changed most, "" if none changed
  std::string pair;   // the sequence stage: what GEMM 1 -> GEMM 2 paired (harness_sequence.h)

  std::string to_json() const {
    if (!ran) return "null";
    std::ostringstream j;
    j << "{\"runs\": " << runs << ", \"changed_runs\": " << changed_runs
      << ", \"most_changed_elements\": " << most_changed
      << ", \"saved\": " << (saved.empty() ? std::string("null") : json_string(saved));
    if (!pair.empty()) j << ", \"pair\": " << json_string(pair);
    j << "}";
    return j.str();
  }
};

// A non-sticky CUDA error the harness found pending and cleared, and when.
struct ClearedError {
  std::string when;
  std::string name;
  std::string string;
};

struct Verdict {
  const char* config_json = "null";  // the case's KernelConfig
  const char* case_name = "";         // its name (KernelConfig.name), for a hook
  bool final_ = false;
  std::string stage = "setup";
  std::string status;
  std::string message;
  long long workspace_bytes = -1;
  double kernel_ms = -1.0;
  bool have_device = false;
  DeviceInfo device;
  bool have_problem = false;
  ProblemInfo problem;
  ReplayInfo graph, repeat, sequence;
  std::vector<ClearedError> cleared_errors;

  std::string to_json() const {
    const auto& probe = tileconform_cudart_probe();
    std::ostringstream j;
    j << "{\n";
    j << "  \"schema\": \"tileconform.flashinfer.verdict/1\",\n";
    j << "  \"final\": " << (final_ ? "true" : "false") << ",\n";
    j << "  \"stage\": " << json_string(stage) << ",\n";
    j << "  \"status\": " << json_string(status) << ",\n";
    j << "  \"message\": " << json_string(message) << ",\n";
    if (probe.first_error != cudaSuccess) {
      j << "  \"cuda_error\": {\"call\": " << json_string(probe.first_error_call)
        << ", \"name\": " << json_string(cudaGetErrorName(probe.first_error))
        << ", \"string\": " << json_string(cudaGetErrorString(probe.first_error)) << "},\n";
    } else {
      j << "  \"cuda_error\": null,\n";
    }
    j << "  \"cleared_errors\": [";
    for (size_t i = 0; i < cleared_errors.size(); ++i) {
      const auto& e = cleared_errors[i];
      j << (i ? ", " : "") << "{\"when\": " << json_string(e.when)
        << ", \"name\": " << json_string(e.name) << ", \"string\": " << json_string(e.string)
        << "}";
    }
    j << "],\n";
    auto number_or_null = [](long long v) {
      return v < 0 ? std::string("null") : std::to_string(v);
    };
    j << "  \"workspace_bytes\": " << number_or_null(workspace_bytes) << ",\n";
    j << "  \"smem_requested\": " << number_or_null(probe.smem_requested) << ",\n";
    j << "  \"smem_limit\": " << number_or_null(have_device ? device.max_smem_optin : -1) << ",\n";
    if (kernel_ms >= 0.0) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.6f", kernel_ms);
      j << "  \"kernel_ms\": " << buf << ",\n";
    } else {
      j << "  \"kernel_ms\": null,\n";
    }
    j << "  \"poison_byte\": " << (problem.poison ? std::to_string(kPoisonByte) : "null") << ",\n";
    j << "  \"graph\": " << graph.to_json() << ",\n";
    j << "  \"repeat\": " << repeat.to_json() << ",\n";
    j << "  \"sequence\": " << sequence.to_json() << ",\n";
    if (have_device) {
      j << "  \"device\": {\"name\": " << json_string(device.name) << ", \"cc\": ["
        << device.cc_major << ", " << device.cc_minor << "], \"sm_count\": " << device.sm_count
        << ", \"max_smem_per_block_optin\": " << device.max_smem_optin << "},\n";
    } else {
      j << "  \"device\": null,\n";
    }
    if (have_problem) {
      j << "  \"problem\": {\"experts\": " << problem.experts
        << ", \"total_rows\": " << problem.total_rows() << ", \"n\": " << problem.n
        << ", \"k\": " << problem.k << ", \"out_rows\": " << problem.out_rows
        << ", \"timing_iters\": " << problem.timing_iters
        << ", \"graph_replays\": " << problem.graph_replays
        << ", \"repeats\": " << problem.repeats
        << ", \"sequence\": [" << problem.sequence_runs << ", " << problem.sequence_replays << "]"
        << ", \"enable_pdl\": " << (problem.enable_pdl ? "true" : "false")
        << ", \"cluster_shape\": [" << problem.cluster_shape[0] << ", " << problem.cluster_shape[1]
        << "], \"fallback_cluster_shape\": [" << problem.fallback_cluster_shape[0] << ", "
        << problem.fallback_cluster_shape[1] << "]"
        << ", \"bias\": " << (problem.bias ? "true" : "false")
        << ", \"use_reduction\": " << (problem.use_reduction ? "true" : "false") << "},\n";
    } else {
      j << "  \"problem\": null,\n";
    }
    j << "  \"config\": " << config_json << "\n";
    j << "}\n";
    return j.str();
  }
};

// Atomic: write RUN_DIR/verdict.json.tmp, then rename it over verdict.json.
void write_verdict(const std::string& run_dir, const Verdict& verdict) {
  const std::string path = run_dir + "/verdict.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << verdict.to_json();
    out.flush();
    if (!out) {
      std::fprintf(stderr, "tileconform harness: cannot write %s\n", tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "tileconform harness: cannot rename %s\n", tmp.c_str());
  }
}

// ------------------------------------------------------------------------------------------
// Errors raised by the harness itself (before the launcher is reached, or after it returned).

struct StageError : std::runtime_error {
  std::string stage;
  std::string status;
  StageError(std::string stage_, std::string status_, const std::string& message)
      : std::runtime_error(message), stage(std::move(stage_)), status(std::move(status_)) {}
};

void check_cuda(cudaError_t err, const char* what, const char* stage = "setup") {
  if (err != cudaSuccess) {
    throw StageError(stage, cudaGetErrorName(err),
                     std::string(what) + ": " + cudaGetErrorString(err));
  }
}

[[noreturn]] void bad_input(const std::string& message) {
  throw StageError("setup", "bad_input", message);
}

}  // namespace tileconform
