// What a dense GEMM harness writes into its run directory: verdict.json, read by
// pytest_tileconform/flashinfer_dense/report.py. The harness does not name the stage: it reports
// whether FlashInfer's launcher returned or threw, and what it threw; the backend reads the stage
// from the launcher's own message.
#pragma once
#include <cstdio>
#include <string>

namespace tileconform_dense {

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

// outcome: "returned" or "threw"; a missing file means the harness never got that far
inline int write_verdict(const char* run_dir, const char* outcome, const std::string& message,
                         size_t workspace) {
  std::string path = std::string(run_dir) + "/verdict.json";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return 3;
  std::fprintf(f, "{\"outcome\": \"%s\", \"message\": %s, \"workspace_bytes\": %zu}\n", outcome,
               json_string(message).c_str(), workspace);
  std::fclose(f);
  return 0;
}

}  // namespace tileconform_dense
