// Conformance harness for instantiations of TensorRT-LLM's (FlashInfer's) MoE grouped GEMM
// launcher `tma_warp_specialized_generic_moe_gemm_kernelLauncher`.
//
// This file is not compiled on its own: codegen.py emits a translation unit that includes
// cudart_probe.h and the launcher .inl, instantiates one or more configurations with
// INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM (as FlashInfer's generate_kernels.py does, several
// per file), includes this file and then defines the case table (kCases, kCaseCount): per
// instantiation its name, its KernelConfig as JSON and run_case<C> for a struct C with
//
//   launcher                   pointer to the instantiated launcher
//   arch                       SM version the kernel was compiled for (90, 100, 120, ...)
//   act_bits, weight_bits, out_bits
//                              storage bits per element of A, B and D
//   swap_ab                    must match the instantiation
//   block_scale                0 none, 1 NVFP4 (e4m3 scale per 16), 2 MXFPX (ue8m0 per 32):
//                              the launcher's IsBlockScaled operands, read from a_sf.bin/b_sf.bin
//   finalize                   EpilogueFusion::FINALIZE instantiated
//
// Usage: harness RUN_DIR [CASE]; CASE (a KernelConfig name) may be left out when the
// executable holds one case. Linked as a shared library instead, a unit exports
// tileconform_run_case (end of this file), which the runner (runner.cpp) calls. Inputs and
// outputs are described in PROTOCOL.md beside this file.
//
// CUDA runtime entry points this file calls itself (keep this list short, a fake runtime must
// provide them): cudaGetDeviceCount, cudaGetDeviceProperties, cudaDeviceGetAttribute,
// cudaMalloc, cudaFree, cudaMemcpy, cudaStreamCreate, cudaStreamDestroy, cudaStreamSynchronize,
// cudaDeviceSynchronize, cudaGetLastError, cudaGetErrorName, cudaGetErrorString, cudaEventCreate, cudaEventRecord,
// cudaEventSynchronize, cudaEventElapsedTime, cudaEventDestroy, plus a <<<>>> launch of
// the fault-injection kernel. The full list of cudart symbols in a linked harness (including
// those used by CUTLASS) is in PROTOCOL.md.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cutlass/util/packed_stride.hpp"

// From here on the harness talks to the CUDA runtime directly (see cudart_probe.h).
#undef cudaFuncSetAttribute
#undef cudaLaunchKernelExC
#undef cudaLaunchKernelEx
#undef cudaGetLastError

namespace tileconform {

using tensorrt_llm::kernels::cutlass_kernels::TmaWarpSpecializedGroupedGemmInput;
using GemmInput = TmaWarpSpecializedGroupedGemmInput;

// Scale-factor geometry of TensorRT-LLM (moe_gemm_kernels.h): a BlockScaledConfig per kind, its
// LayoutSF (what the launcher reinterprets fpX_block_scaling_factors_stride_* as) and the
// padding of the flat SF buffers (128 rows, 4 scale columns: one SfAtom).
template <int Kind>
struct BlockScale {
  using Config = GemmInput::NVFP4BlockScaledConfig;  // unused without block scaling
  static constexpr auto type = GemmInput::FpXBlockScalingType::NONE;
  static constexpr int64_t vec = 1, min_rows = 1, min_k = 1;
};
template <>
struct BlockScale<1> {
  using Config = GemmInput::NVFP4BlockScaledConfig;
  static constexpr auto type = GemmInput::FpXBlockScalingType::NVFP4;
  static constexpr int64_t vec = GemmInput::NVFP4BlockScaleVectorSize;
  static constexpr int64_t min_rows = GemmInput::MinNDimAlignmentNVFP4;
  static constexpr int64_t min_k = GemmInput::MinKDimAlignmentNVFP4;
};
template <>
struct BlockScale<2> {
  using Config = GemmInput::MXFPXBlockScaledConfig;
  static constexpr auto type = GemmInput::FpXBlockScalingType::MXFPX;
  static constexpr int64_t vec = GemmInput::MXFPXBlockScaleVectorSize;
  static constexpr int64_t min_rows = GemmInput::MinNDimAlignmentMXFPX;
  static constexpr int64_t min_k = GemmInput::MinKDimAlignmentMXFPX;
};

// Element offsets of one expert's scale factors in the flat SF buffers: TensorRT-LLM's
// getOffsetActivationSF / getOffsetWeightSF (cutlass_fused_moe_kernels.cuh). Each expert's
// activation SFs start at a 128-row boundary, so a_sf.bin holds act_sf_offset(E, total) bytes.
template <class BS>
int64_t act_sf_offset(int64_t expert, int64_t rows_before, int64_t k) {
  const int64_t start = GemmInput::alignToSfDim(rows_before + expert * (BS::min_rows - 1), BS::min_rows);
  return start * GemmInput::alignToSfDim(k, BS::min_k) / BS::vec;
}
template <class BS>
int64_t weight_sf_offset(int64_t expert, int64_t n, int64_t k) {
  return expert * GemmInput::alignToSfDim(n, BS::min_rows) * GemmInput::alignToSfDim(k, BS::min_k) /
         BS::vec;
}

// ------------------------------------------------------------------------------------------
// verdict.json

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
  bool inject_trap = false;
  bool enable_pdl = false;
  bool use_reduction = false;  // finalize: several permuted rows share an output row

  int64_t total_rows() const { return std::accumulate(rows.begin(), rows.end(), int64_t{0}); }
};

struct Verdict {
  const char* config_json = "null";  // the case's KernelConfig
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
        << ", \"enable_pdl\": " << (problem.enable_pdl ? "true" : "false")
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

// ------------------------------------------------------------------------------------------
// Inputs

ProblemInfo read_problem(const std::string& path, bool finalize) {
  std::ifstream in(path);
  if (!in) bad_input("cannot open " + path);
  std::vector<std::string> tokens{std::istream_iterator<std::string>(in),
                                  std::istream_iterator<std::string>()};
  auto to_int = [&](size_t i, const std::string& key) -> int64_t {
    if (i >= tokens.size()) bad_input("problem.txt: missing value for '" + key + "'");
    try {
      size_t used = 0;
      int64_t v = std::stoll(tokens[i], &used);
      if (used != tokens[i].size()) throw std::invalid_argument(tokens[i]);
      return v;
    } catch (const std::exception&) {
      bad_input("problem.txt: '" + key + "' expects an integer, got '" + tokens[i] + "'");
    }
  };
  ProblemInfo p;
  bool have_n = false, have_k = false, have_rows = false;
  for (size_t i = 0; i < tokens.size();) {
    const std::string key = tokens[i++];
    if (key == "experts") {
      p.experts = static_cast<int>(to_int(i++, key));
    } else if (key == "rows") {
      have_rows = true;
      while (i < tokens.size() && tokens[i].find_first_not_of("0123456789") == std::string::npos) {
        p.rows.push_back(to_int(i++, key));
      }
    } else if (key == "n") {
      p.n = to_int(i++, key);
      have_n = true;
    } else if (key == "k") {
      p.k = to_int(i++, key);
      have_k = true;
    } else if (key == "out_rows") {
      p.out_rows = to_int(i++, key);
    } else if (key == "timing_iters") {
      p.timing_iters = static_cast<int>(to_int(i++, key));
    } else if (key == "enable_pdl") {
      p.enable_pdl = to_int(i++, key) != 0;
    } else if (key == "inject_fault") {
      if (i >= tokens.size() || tokens[i] != "trap") bad_input("problem.txt: inject_fault trap");
      p.inject_trap = true;
      ++i;
    } else {
      bad_input("problem.txt: unknown key '" + key + "'");
    }
  }
  if (p.experts <= 0) bad_input("problem.txt: 'experts' must be positive");
  if (!have_rows || static_cast<int>(p.rows.size()) != p.experts) {
    bad_input("problem.txt: 'rows' must list one count per expert");
  }
  if (!have_n || !have_k || p.n <= 0 || p.k <= 0) {
    bad_input("problem.txt: 'n' and 'k' must be positive");
  }
  if (p.timing_iters < 0) bad_input("problem.txt: 'timing_iters' must be >= 0");
  if (finalize && p.out_rows <= 0) bad_input("problem.txt: finalize needs 'out_rows' > 0");
  return p;
}

std::vector<char> read_file(const std::string& path, size_t expected_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_input("cannot open " + path);
  std::vector<char> data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (data.size() != expected_bytes) {
    bad_input(path + " has " + std::to_string(data.size()) + " bytes, expected " +
              std::to_string(expected_bytes));
  }
  return data;
}

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

size_t storage_bytes(int64_t elements, int bits) {
  return static_cast<size_t>((elements * bits + 7) / 8);
}

// ------------------------------------------------------------------------------------------
// Device memory

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) check_cuda(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  void upload(const void* host, size_t bytes) {
    if (bytes > 0) {
      check_cuda(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    }
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload_vector(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  buffer.upload(host.data(), buffer.bytes());
  return buffer;
}

// ------------------------------------------------------------------------------------------
// Launcher call and classification of its exceptions

// TensorRT-LLM reports CUTLASS failures as TllmException with a fixed message per stage
// (moe_gemm_tma_ws_launcher.inl): "<prefix>. Error: <cutlassGetStatusString>".
void classify_launcher_exception(const std::string& what, Verdict& verdict) {
  struct Marker {
    const char* text;
    const char* stage;
  };
  static const Marker markers[] = {
      {"Grouped GEMM kernel will fail for params", "can_implement"},
      {"Failed to initialize cutlass TMA WS grouped gemm", "initialize"},
      {"Failed to run cutlass TMA WS grouped gemm", "launch"},
  };
  verdict.message = what;
  for (const auto& m : markers) {
    const auto pos = what.find(m.text);
    if (pos == std::string::npos) continue;
    verdict.stage = m.stage;
    const std::string error_tag = "Error: ";
    auto begin = what.find(error_tag, pos);
    if (begin == std::string::npos) {
      verdict.status = "unknown";
      return;
    }
    begin += error_tag.size();
    // TllmException appends " (file:line)\n<backtrace>" to the message.
    const auto end = what.find_first_of("(\n", begin);
    std::string status =
        what.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    while (!status.empty() && status.back() == ' ') status.pop_back();
    verdict.status = status;
    return;
  }
  // sync_check_cuda_error() inside the launcher (only active without NDEBUG).
  if (what.find("CUDA runtime error in") != std::string::npos) {
    verdict.stage = "run";
    verdict.status = "cuda_error";
    return;
  }
  // Any other TLLM_CHECK/TLLM_THROW (workspace too small, swap_ab mismatch, ...).
  verdict.stage = "launcher";
  verdict.status = "exception";
}

__global__ void trap_kernel() { __trap(); }

struct GemmSetup {
  GemmInput input{};
  std::vector<DeviceBuffer> buffers;  // keeps every array referenced by `input` alive
};

template <class T>
T* keep(GemmSetup& setup, const std::vector<T>& host) {
  setup.buffers.push_back(upload_vector(host));
  return setup.buffers.back().as<T>();
}

// Host equivalent of TensorRT-LLM's computeStridesTmaWarpSpecializedKernel +
// computeTmaWarpSpecializedInputPointers + setFinalizeFusionParams (cutlass_fused_moe_kernels.cuh,
// moe_gemm_tma_warp_specialized_input.cu) for a single GEMM.
// With block scaling also setupFP4BlockScalingFactors: per expert a LayoutSF from
// tile_atom_to_shape_SFA/SFB (swapped with swap_ab) and SF pointers at TensorRT-LLM's offsets.
template <class C>
GemmSetup make_gemm_input(const ProblemInfo& p, const DeviceBuffer& a, const DeviceBuffer& b,
                          const DeviceBuffer& d, const DeviceBuffer& alpha,
                          const DeviceBuffer& router_scales, const DeviceBuffer& dest_row,
                          const DeviceBuffer& a_sf, const DeviceBuffer& b_sf) {
  using BS = BlockScale<C::block_scale>;
  constexpr bool kSwapAB = C::swap_ab, kFinalize = C::finalize, kBlockScaled = C::block_scale != 0;
  const int E = p.experts;
  GemmSetup setup;
  GemmInput& in = setup.input;
  in.swap_ab = kSwapAB;
  in.fusion = kFinalize ? GemmInput::EpilogueFusion::FINALIZE : GemmInput::EpilogueFusion::NONE;
  in.fpX_block_scaling_type = BS::type;
  in.enable_pdl = p.enable_pdl;

  std::vector<GemmInput::ProblemShape::UnderlyingProblemShape> shapes;
  std::vector<GemmInput::StrideA> stride_a;  // act (no swap) / weight (swap)
  std::vector<GemmInput::StrideB> stride_b;  // weight (no swap) / act (swap)
  std::vector<GemmInput::StrideD> stride_d;
  std::vector<GemmInput::StrideD_T> stride_d_t;
  std::vector<const void*> ptr_act, ptr_weight;
  std::vector<void*> ptr_d;
  std::vector<const float*> ptr_alpha, ptr_router;
  std::vector<const int*> ptr_index;
  using LayoutSF = typename BS::Config::LayoutSF;
  std::vector<LayoutSF> layout_sf_act, layout_sf_weight;
  std::vector<const GemmInput::ElementSF*> ptr_sf_act, ptr_sf_weight;

  int64_t offset = 0;  // rows of all previous experts
  for (int e = 0; e < E; ++e) {
    const int m = static_cast<int>(p.rows[e]);
    const int n = static_cast<int>(p.n);
    const int k = static_cast<int>(p.k);
    using cute::make_shape;
    using cutlass::make_cute_packed_stride;
    if (kSwapAB) {
      // The weight is operand A (N x K, row major), the activation operand B; D is N x M
      // column major, i.e. the same M x N row-major memory as without swap.
      shapes.emplace_back(int64_t{n}, int64_t{m}, int64_t{k});
      stride_a.push_back(make_cute_packed_stride(GemmInput::StrideA{}, make_shape(n, k, 1)));
      stride_b.push_back(make_cute_packed_stride(GemmInput::StrideB{}, make_shape(m, k, 1)));
      stride_d_t.push_back(make_cute_packed_stride(GemmInput::StrideD_T{}, make_shape(n, m, 1)));
    } else {
      shapes.emplace_back(int64_t{m}, int64_t{n}, int64_t{k});
      stride_a.push_back(make_cute_packed_stride(GemmInput::StrideA{}, make_shape(m, k, 1)));
      stride_b.push_back(make_cute_packed_stride(GemmInput::StrideB{}, make_shape(n, k, 1)));
      stride_d.push_back(make_cute_packed_stride(GemmInput::StrideD{}, make_shape(m, n, 1)));
    }
    ptr_act.push_back(a.as<char>() + storage_bytes(offset * p.k, C::act_bits));
    ptr_weight.push_back(b.as<char>() +
                         storage_bytes(int64_t{e} * p.n * p.k, C::weight_bits));
    if (alpha.bytes() > 0) ptr_alpha.push_back(alpha.as<float>() + e);
    if constexpr (kBlockScaled) {
      if (kSwapAB) {
        layout_sf_act.push_back(BS::Config::tile_atom_to_shape_SFB(make_shape(n, m, k, 1)));
        layout_sf_weight.push_back(BS::Config::tile_atom_to_shape_SFA(make_shape(n, m, k, 1)));
      } else {
        layout_sf_act.push_back(BS::Config::tile_atom_to_shape_SFA(make_shape(m, n, k, 1)));
        layout_sf_weight.push_back(BS::Config::tile_atom_to_shape_SFB(make_shape(m, n, k, 1)));
      }
      ptr_sf_act.push_back(a_sf.as<GemmInput::ElementSF>() + act_sf_offset<BS>(e, offset, p.k));
      ptr_sf_weight.push_back(b_sf.as<GemmInput::ElementSF>() + weight_sf_offset<BS>(e, p.n, p.k));
    }
    if (kFinalize) {
      ptr_router.push_back(router_scales.as<float>() + offset);
      ptr_index.push_back(dest_row.as<int>() + offset);
    } else {
      ptr_d.push_back(d.as<char>() + storage_bytes(offset * p.n, C::out_bits));
    }
    offset += p.rows[e];
  }

  in.shape_info.num_groups = E;
  in.shape_info.problem_shapes = keep(setup, shapes);
  in.shape_info.host_problem_shapes = nullptr;  // as TensorRT-LLM's configureWorkspace()
  if (kSwapAB) {
    in.stride_weight = keep(setup, stride_a);
    in.stride_act = keep(setup, stride_b);
  } else {
    in.stride_act = keep(setup, stride_a);
    in.stride_weight = keep(setup, stride_b);
  }
  in.ptr_act = keep(setup, ptr_act);
  in.ptr_weight = keep(setup, ptr_weight);
  in.ptr_c = nullptr;
  in.stride_c = nullptr;
  in.alpha_scale_ptr_array = ptr_alpha.empty() ? nullptr : keep(setup, ptr_alpha);
  if constexpr (kBlockScaled) {
    in.fpX_block_scaling_factors_act = keep(setup, ptr_sf_act);
    in.fpX_block_scaling_factors_weight = keep(setup, ptr_sf_weight);
    in.fpX_block_scaling_factors_stride_act = keep(setup, layout_sf_act);
    in.fpX_block_scaling_factors_stride_weight = keep(setup, layout_sf_weight);
  }

  if (kFinalize) {
    auto& fin = in.fused_finalize_epilogue;
    const int out_rows = static_cast<int>(p.out_rows);
    const int n = static_cast<int>(p.n);
    fin.ptr_final_output = d.as<void>();
    fin.stride_final_output = cutlass::make_cute_packed_stride(
        GemmInput::FusedFinalizeEpilogue::StrideFinalOutput{}, cute::make_shape(out_rows, n, 1));
    fin.stride_final_output_transposed = cutlass::make_cute_packed_stride(
        GemmInput::FusedFinalizeEpilogue::StrideFinalOutput_T{}, cute::make_shape(n, out_rows, 1));
    fin.num_rows_in_final_output = out_rows;  // the scatter index is taken modulo this
    fin.shape_override = n;
    fin.use_reduction = p.use_reduction;
    fin.ptr_bias = nullptr;
    fin.ptr_router_scales = keep(setup, ptr_router);
    fin.ptr_source_token_index = keep(setup, ptr_index);
  } else {
    in.ptr_d = keep(setup, ptr_d);
    in.stride_d = kSwapAB ? static_cast<void*>(keep(setup, stride_d_t))
                          : static_cast<void*>(keep(setup, stride_d));
  }
  return setup;
}

template <class C>
void call_launcher(const GemmInput& input, int experts, int sm_count, cudaStream_t stream,
                   size_t* workspace_size) {
  C::launcher(input, experts, sm_count, stream, /*kernel_occupancy=*/nullptr, workspace_size,
            /*dynamic_cluster_shape=*/{}, /*fallback_cluster_shape=*/{});
}

// ------------------------------------------------------------------------------------------

DeviceInfo query_device() {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw StageError("setup", "cudaErrorNoDevice", "no CUDA device visible");
  DeviceInfo info;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  check_cuda(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, 0),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  check_cuda(
      cudaDeviceGetAttribute(&info.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
      "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  return info;
}

template <class C>
void run_case(const std::string& run_dir, Verdict& verdict) {
  using BS = BlockScale<C::block_scale>;
  constexpr bool kSwapAB = C::swap_ab, kFinalize = C::finalize, kBlockScaled = C::block_scale != 0;
  ProblemInfo& p = verdict.problem;
  p = read_problem(run_dir + "/problem.txt", kFinalize);
  const int64_t total = p.total_rows();

  auto a_host = read_file(run_dir + "/a.bin", storage_bytes(total * p.k, C::act_bits));
  auto b_host = read_file(run_dir + "/b.bin",
                          storage_bytes(int64_t{p.experts} * p.n * p.k, C::weight_bits));
  std::vector<char> alpha_host;
  if (file_exists(run_dir + "/alpha.bin")) {
    alpha_host = read_file(run_dir + "/alpha.bin", sizeof(float) * p.experts);
  }
  std::vector<char> a_sf_host, b_sf_host;
  if constexpr (kBlockScaled) {
    if (p.k % BS::vec != 0) {
      bad_input("problem.txt: k must be a multiple of the scale block " + std::to_string(BS::vec));
    }
    a_sf_host = read_file(run_dir + "/a_sf.bin",
                          static_cast<size_t>(act_sf_offset<BS>(p.experts, total, p.k)));
    b_sf_host = read_file(run_dir + "/b_sf.bin",
                          static_cast<size_t>(weight_sf_offset<BS>(p.experts, p.n, p.k)));
  }
  std::vector<char> router_host, dest_host;
  if (kFinalize) {
    router_host = read_file(run_dir + "/router_scales.bin", sizeof(float) * total);
    dest_host = read_file(run_dir + "/dest_row.bin", sizeof(int32_t) * total);
    std::vector<int> hits(p.out_rows, 0);
    for (int64_t r = 0; r < total; ++r) {
      int32_t t;
      std::memcpy(&t, dest_host.data() + r * sizeof(int32_t), sizeof(t));
      if (t < 0 || t >= p.out_rows) {
        bad_input("dest_row.bin: row " + std::to_string(r) + " targets " + std::to_string(t) +
                  ", outside [0, out_rows)");
      }
      if (++hits[t] > 1) p.use_reduction = true;
    }
  }
  verdict.have_problem = true;

  verdict.device = query_device();
  verdict.have_device = true;
  const int device_sm = verdict.device.cc_major * 10 + verdict.device.cc_minor;
  if (device_sm != C::arch) {
    throw StageError("setup", "arch_mismatch",
                     "kernel compiled for sm_" + std::to_string(C::arch) +
                         ", device is sm_" + std::to_string(device_sm));
  }

  const int64_t d_rows = kFinalize ? p.out_rows : total;
  const size_t d_bytes = storage_bytes(d_rows * p.n, C::out_bits);
  DeviceBuffer a(a_host.size()), b(b_host.size()), d(d_bytes), alpha(alpha_host.size());
  DeviceBuffer router_scales(router_host.size()), dest_row(dest_host.size());
  DeviceBuffer a_sf(a_sf_host.size()), b_sf(b_sf_host.size());
  a_sf.upload(a_sf_host.data(), a_sf_host.size());
  b_sf.upload(b_sf_host.data(), b_sf_host.size());
  a.upload(a_host.data(), a_host.size());
  b.upload(b_host.data(), b_host.size());
  alpha.upload(alpha_host.data(), alpha_host.size());
  router_scales.upload(router_host.data(), router_host.size());
  dest_row.upload(dest_host.data(), dest_host.size());
  // Finalize accumulates into D (red.add), so D starts at zero, as TensorRT-LLM memsets it.
  // Without fusion D starts as all-ones bytes (NaN in every float format): elements the
  // kernel never writes cannot pass for results.
  const std::vector<unsigned char> d_init(d_bytes, kFinalize ? 0x00 : 0xFF);
  d.upload(d_init.data(), d_bytes);

  GemmSetup setup = make_gemm_input<C>(p, a, b, d, alpha, router_scales, dest_row, a_sf, b_sf);

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};

  const int sm = verdict.device.sm_count;
  size_t workspace_bytes = 0;
  call_launcher<C>(setup.input, p.experts, sm, stream, &workspace_bytes);
  verdict.workspace_bytes = static_cast<long long>(workspace_bytes);
  DeviceBuffer workspace(workspace_bytes);
  setup.input.gemm_workspace = workspace.as<uint8_t>();
  setup.input.gemm_workspace_size = workspace_bytes;

  // If the process dies from here on (crash, hang + kill), Python sees this verdict.
  verdict.stage = "run";
  verdict.status = "incomplete";
  verdict.message = "the harness process ended while the launcher or the kernel was running";
  write_verdict(run_dir, verdict);

  call_launcher<C>(setup.input, p.experts, sm, stream, nullptr);
  if (p.inject_trap) {
    trap_kernel<<<1, 1, 0, stream>>>();
  }
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", "run");
  check_cuda(cudaGetLastError(), "cudaGetLastError", "run");

  std::vector<char> d_host(d_bytes);
  check_cuda(cudaMemcpy(d_host.data(), d.as<void>(), d_bytes, cudaMemcpyDeviceToHost),
             "cudaMemcpy D2H", "run");
  {
    std::ofstream out(run_dir + "/d.bin", std::ios::binary | std::ios::trunc);
    out.write(d_host.data(), static_cast<std::streamsize>(d_host.size()));
    if (!out) throw StageError("run", "io_error", "cannot write d.bin");
  }

  if (p.timing_iters > 0) {
    cudaEvent_t start = nullptr, stop = nullptr;
    check_cuda(cudaEventCreate(&start), "cudaEventCreate", "run");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate", "run");
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord", "run");
    for (int i = 0; i < p.timing_iters; ++i) {
      call_launcher<C>(setup.input, p.experts, sm, stream, nullptr);
    }
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord", "run");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize", "run");
    float total_ms = 0.f;
    check_cuda(cudaEventElapsedTime(&total_ms, start, stop), "cudaEventElapsedTime", "run");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    verdict.kernel_ms = static_cast<double>(total_ms) / p.timing_iters;
  }

  verdict.stage = "pass";
  verdict.status = "Success";
  verdict.message.clear();
}

// The executable's cases, defined by the generated translation unit after this file.
struct CaseEntry {
  const char* name;         // KernelConfig.name
  const char* config_json;  // KernelConfig as JSON, echoed into verdict.json
  void (*run)(const std::string& run_dir, Verdict& verdict);
};
extern const CaseEntry kCases[];
extern const int kCaseCount;

const CaseEntry* find_case(const char* name) {
  for (int i = 0; i < kCaseCount; ++i) {
    if (name != nullptr && std::strcmp(kCases[i].name, name) == 0) return &kCases[i];
  }
  return nullptr;
}

}  // namespace tileconform

// Runs case CASE_NAME with its inputs in RUN_DIR and writes RUN_DIR/verdict.json. Returns 0 if
// it passed, 1 for any other verdict, 2 if this unit has no such case. Sets *context_lost when
// the device is unusable afterwards (a trap or a fault leaves a sticky error in the context):
// a process that runs further cases must end and be started again.
//
// Exported so that the runner (runner.cpp) can run the cases of many units in one process,
// with one CUDA context; the executable form (main below) runs one case.
extern "C" __attribute__((visibility("default"))) int tileconform_run_case(const char* run_dir,
                                                                          const char* case_name,
                                                                          int* context_lost) {
  using namespace tileconform;
  *context_lost = 0;
  const CaseEntry* entry = find_case(case_name);
  if (entry == nullptr) return 2;
  tileconform_cudart_probe() = TileconformCudartProbe{};
  Verdict verdict;
  verdict.config_json = entry->config_json;
  try {
    entry->run(run_dir, verdict);
  } catch (const StageError& e) {
    verdict.stage = e.stage;
    verdict.status = e.status;
    verdict.message = e.what();
  } catch (const std::exception& e) {
    classify_launcher_exception(e.what(), verdict);
  }
  verdict.final_ = true;
  write_verdict(run_dir, verdict);
  if (verdict.have_device && cudaDeviceSynchronize() != cudaSuccess) *context_lost = 1;
  return verdict.stage == "pass" ? 0 : 1;
}

int main(int argc, char** argv) {
  using namespace tileconform;
  const char* name = argc == 3 ? argv[2] : (kCaseCount == 1 ? kCases[0].name : nullptr);
  if ((argc != 2 && argc != 3) || find_case(name) == nullptr) {
    std::fprintf(stderr, "usage: %s RUN_DIR%s\n", argv[0], kCaseCount == 1 ? " [CASE]" : " CASE");
    std::fprintf(stderr, "cases in this executable:\n");
    for (int i = 0; i < kCaseCount; ++i) std::fprintf(stderr, "  %s\n", kCases[i].name);
    return 2;
  }
  int context_lost = 0;
  return tileconform_run_case(argv[1], name, &context_lost);
}
