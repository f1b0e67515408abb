// The harness's inputs: problem.txt, the operand files, device buffers and the launcher's
// TmaWarpSpecializedGroupedGemmInput built from them as TensorRT-LLM builds it (part of
// harness.cu, see there).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cutlass/util/packed_stride.hpp"
#include "harness_verdict.h"
#include "tileconform_operands.h"

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

ProblemInfo read_problem(const std::string& path, bool finalize, bool dynamic_cga) {
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
  bool have_n = false, have_k = false, have_rows = false, have_cluster = false;
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
    } else if (key == "graph_replays") {
      p.graph_replays = static_cast<int>(to_int(i++, key));
    } else if (key == "repeats") {
      p.repeats = static_cast<int>(to_int(i++, key));
    } else if (key == "sequence") {
      // sequence N M: N runs back to back without host synchronization, then M graph replays
      p.sequence_runs = static_cast<int>(to_int(i++, key));
      p.sequence_replays = static_cast<int>(to_int(i++, key));
    } else if (key == "cluster_shape" || key == "fallback_cluster_shape") {
      // cluster_shape M N / fallback_cluster_shape M N: a dynamic-CGA case's runtime clusters
      int* shape = key == "cluster_shape" ? p.cluster_shape : p.fallback_cluster_shape;
      shape[0] = static_cast<int>(to_int(i++, key));
      shape[1] = static_cast<int>(to_int(i++, key));
      if (shape[0] <= 0 || shape[1] <= 0 || shape[0] > 16 || shape[1] > 16) {
        bad_input("problem.txt: '" + key + "' needs two integers in 1..16");
      }
      have_cluster = true;
    } else if (key == "poison") {
      p.poison = to_int(i++, key) != 0;
    } else if (key == "hook") {
      // hook PATH ARG (tileconform_hook.h): the library and the word it is given
      if (i + 1 >= tokens.size()) bad_input("problem.txt: 'hook' needs a library path and an argument");
      p.hook = tokens[i++];
      p.hook_arg = tokens[i++];
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
  if (p.timing_iters < 0 || p.graph_replays < 0 || p.repeats < 0 || p.sequence_runs < 0 ||
      p.sequence_replays < 0) {
    bad_input("problem.txt: 'timing_iters', 'graph_replays', 'repeats' and 'sequence' must be >= 0");
  }
  if (finalize && p.out_rows <= 0) bad_input("problem.txt: finalize needs 'out_rows' > 0");
  if (dynamic_cga && (p.cluster_shape[0] == 0 || p.fallback_cluster_shape[0] == 0)) {
    bad_input("problem.txt: a dynamic-CGA kernel needs 'cluster_shape' and 'fallback_cluster_shape'");
  }
  if (!dynamic_cga && have_cluster) {
    bad_input("problem.txt: 'cluster_shape' is for dynamic-CGA kernels; this one's cluster is static");
  }
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
  // Memory someone else owns (an operand the runner mapped): never freed here.
  static DeviceBuffer borrowed(void* ptr, size_t bytes) {
    DeviceBuffer buffer;
    buffer.ptr_ = ptr;
    buffer.bytes_ = bytes;
    buffer.owned_ = false;
    return buffer;
  }
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) check_cuda(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(owned_, other.owned_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr && owned_) cudaFree(ptr_);
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
  bool owned_ = true;
};

// The operands the runner mapped for a case (tileconform_operands.h); none in file mode.
class OperandTable {
 public:
  OperandTable(const TileconformOperand* operands, int count) : operands_(operands), count_(count) {}
  bool given() const { return count_ > 0; }
  bool has(const char* name) const { return find(name) != nullptr; }

  // Operand NAME, which must hold exactly `bytes` bytes (bad_input otherwise, as a file of
  // another size is).
  DeviceBuffer borrow(const char* name, size_t bytes) const {
    const TileconformOperand* operand = find(name);
    if (operand == nullptr) bad_input(std::string("operands: no '") + name + "'");
    if (operand->bytes != bytes) {
      bad_input(std::string("operands: '") + name + "' has " + std::to_string(operand->bytes) +
                " bytes, expected " + std::to_string(bytes));
    }
    return DeviceBuffer::borrowed(operand->ptr, operand->bytes);
  }

 private:
  const TileconformOperand* find(const char* name) const {
    for (int i = 0; i < count_; ++i) {
      if (std::strcmp(operands_[i].name, name) == 0) return &operands_[i];
    }
    return nullptr;
  }
  const TileconformOperand* operands_;
  int count_;
};

template <class T>
DeviceBuffer upload_vector(const std::vector<T>& host) {
  DeviceBuffer buffer(host.size() * sizeof(T));
  buffer.upload(host.data(), buffer.bytes());
  return buffer;
}

struct GemmSetup {
  GemmInput input{};
  std::vector<DeviceBuffer> buffers;  // keeps every array referenced by `input` alive
  void* d_base = nullptr;  // D: the mixed-input launcher's GroupedGemmInput::C
};

// A per-expert array of the launcher's input as TensorRT-LLM's computeStridesTmaWarpSpecialized
// Kernel leaves it: an entry is written only for an expert that has rows; the others keep what
// the workspace held, which a kernel must not read. Here they hold the poison or, without it,
// are never written at all (compute-sanitizer's initcheck then sees a read of them).
template <class T>
class PerExpert {
 public:
  PerExpert(int experts, bool poison)
      : poison_(poison), set_(experts, false), bytes_(experts * sizeof(T), kPoisonByte) {}
  void set(int expert, const T& value) {
    std::memcpy(bytes_.data() + expert * sizeof(T), &value, sizeof(T));
    set_[expert] = true;
  }
  T* keep(GemmSetup& setup) const {
    DeviceBuffer buffer(bytes_.size());
    if (poison_) {
      buffer.upload(bytes_.data(), bytes_.size());
    } else {
      for (size_t e = 0; e < set_.size(); ++e) {
        if (!set_[e]) continue;
        check_cuda(cudaMemcpy(buffer.as<char>() + e * sizeof(T), bytes_.data() + e * sizeof(T),
                              sizeof(T), cudaMemcpyHostToDevice),
                   "cudaMemcpy H2D");
      }
    }
    setup.buffers.push_back(std::move(buffer));
    return setup.buffers.back().as<T>();
  }

 private:
  bool poison_;
  std::vector<bool> set_;
  std::vector<unsigned char> bytes_;
};

template <class T>
T* keep(GemmSetup& setup, const std::vector<T>& host) {
  setup.buffers.push_back(upload_vector(host));
  return setup.buffers.back().as<T>();
}

template <class T>
T* keep(GemmSetup& setup, const PerExpert<T>& array) {
  return array.keep(setup);
}

// The device buffers of a case's operands (empty where the case has none). Mixed input:
// b_scale (the folded group scales), token_scales (per row, fp8 x MXFP4), b_packed, B as the
// interleave leaves it, and b_scale_kernel, the scales as the release's launcher reads them (the
// harness's own, harness_mixed.h; either may borrow b or b_scale where the release reads them
// as they are).
struct Operands {
  DeviceBuffer a, b, d, alpha, router_scales, dest_row, a_sf, b_sf, bias;
  DeviceBuffer b_scale, token_scales, b_packed, b_scale_kernel;
  DeviceBuffer clamp_limit;  // activation fusion: ClampedRelu2's limit, one float
};

// D's buffer: out_rows x N of D's type and, for an MXFP8 D (activation fusion), its ue8m0 scales
// right after, laid out as TensorRT-LLM's flat activation SF buffer with K = N (GEMM2 reads them
// as its activation scales): expert e's at act_sf_offset(e, rows before e, N), where the runner
// points fused_activation_epilogue.ptr_block_scaling_factors[e]. One buffer, so that every
// stage that resets, saves or compares D does the same to the scales.
template <class C>
size_t d_elements_bytes(const ProblemInfo& p) {
  return storage_bytes((C::finalize ? p.out_rows : p.total_rows()) * p.n, C::out_bits);
}
template <class C>
size_t d_bytes(const ProblemInfo& p) {
  const size_t sf = C::d_scaled ? static_cast<size_t>(act_sf_offset<BlockScale<2>>(p.experts, p.total_rows(), p.n)) : 0;
  return d_elements_bytes<C>(p) + sf;
}

// Host equivalent of TensorRT-LLM's computeStridesTmaWarpSpecializedKernel +
// computeTmaWarpSpecializedInputStrides/Pointers + setupFP4BlockScalingFactors +
// setFinalizeFusionParams (cutlass_fused_moe_kernels.cuh) for one GEMM: every expert gets its
// problem shape; only experts with rows get strides, operand and D pointers, alpha, scale
// factors, router scales, token indices and bias (the others are left unset, as there).
// Block scaling: per expert a LayoutSF from tile_atom_to_shape_SFA/SFB (swapped with swap_ab)
// and SF pointers at TensorRT-LLM's offsets. Bias exists only with finalize: FlashInfer applies
// GEMM1's bias outside the GEMM and hands GEMM2's to the finalize epilogue, `bias + N * expert`.
template <class C>
GemmSetup make_gemm_input(const ProblemInfo& p, const Operands& ops) {
  using BS = BlockScale<C::block_scale>;
  constexpr bool kSwapAB = C::swap_ab, kFinalize = C::finalize, kBlockScaled = C::block_scale != 0;
  const int E = p.experts;
  GemmSetup setup;
  GemmInput& in = setup.input;
  in.swap_ab = kSwapAB;
#if TILECONFORM_HAS_ACTIVATION_FUSION
  in.fusion = kFinalize       ? GemmInput::EpilogueFusion::FINALIZE
              : C::activation ? GemmInput::EpilogueFusion::ACTIVATION
                              : GemmInput::EpilogueFusion::NONE;
#else
  static_assert(!C::activation, "this FlashInfer release has no EpilogueFusion::ACTIVATION");
  in.fusion = kFinalize ? GemmInput::EpilogueFusion::FINALIZE : GemmInput::EpilogueFusion::NONE;
#endif
  in.fpX_block_scaling_type = BS::type;
  in.enable_pdl = p.enable_pdl;

  using Shape = GemmInput::ProblemShape::UnderlyingProblemShape;
  using LayoutSF = typename BS::Config::LayoutSF;
  std::vector<Shape> shapes;
  PerExpert<GemmInput::StrideA> stride_a(E, p.poison);  // act (no swap) / weight (swap)
  PerExpert<GemmInput::StrideB> stride_b(E, p.poison);  // weight (no swap) / act (swap)
  PerExpert<GemmInput::StrideD> stride_d(E, p.poison);
  PerExpert<GemmInput::StrideD_T> stride_d_t(E, p.poison);
  PerExpert<const void*> ptr_act(E, p.poison), ptr_weight(E, p.poison), ptr_bias(E, p.poison);
  PerExpert<void*> ptr_d(E, p.poison);
  PerExpert<const float*> ptr_alpha(E, p.poison), ptr_router(E, p.poison);
  PerExpert<const int*> ptr_index(E, p.poison);
  PerExpert<LayoutSF> layout_sf_act(E, p.poison), layout_sf_weight(E, p.poison);
  PerExpert<const GemmInput::ElementSF*> ptr_sf_act(E, p.poison), ptr_sf_weight(E, p.poison);
  PerExpert<GemmInput::ElementSF*> ptr_sf_d(E, p.poison);  // MXFP8 D's scales (activation)
  auto* d_sf = reinterpret_cast<GemmInput::ElementSF*>(ops.d.as<char>() + d_elements_bytes<C>(p));

  int64_t offset = 0;  // rows of all previous experts
  for (int e = 0; e < E; ++e) {
    const int m = static_cast<int>(p.rows[e]);
    const int n = static_cast<int>(p.n);
    const int k = static_cast<int>(p.k);
    using cute::make_shape;
    using cutlass::make_cute_packed_stride;
    // M and N swapped with swap_ab: the weight is operand A (N x K, row major), the activation
    // operand B; D is N x M column major, i.e. the same M x N row-major memory as without swap.
    shapes.push_back(kSwapAB ? Shape(n, m, k) : Shape(m, n, k));
    if (m == 0) continue;  // TensorRT-LLM returns here for an expert without rows
    if (kSwapAB) {
      stride_a.set(e, make_cute_packed_stride(GemmInput::StrideA{}, make_shape(n, k, 1)));
      stride_b.set(e, make_cute_packed_stride(GemmInput::StrideB{}, make_shape(m, k, 1)));
      stride_d_t.set(e, make_cute_packed_stride(GemmInput::StrideD_T{}, make_shape(n, m, 1)));
    } else {
      stride_a.set(e, make_cute_packed_stride(GemmInput::StrideA{}, make_shape(m, k, 1)));
      stride_b.set(e, make_cute_packed_stride(GemmInput::StrideB{}, make_shape(n, k, 1)));
      stride_d.set(e, make_cute_packed_stride(GemmInput::StrideD{}, make_shape(m, n, 1)));
    }
    if (ops.alpha.bytes() > 0) ptr_alpha.set(e, ops.alpha.as<float>() + e);
    if constexpr (kBlockScaled) {
      if (kSwapAB) {
        layout_sf_act.set(e, BS::Config::tile_atom_to_shape_SFB(make_shape(n, m, k, 1)));
        layout_sf_weight.set(e, BS::Config::tile_atom_to_shape_SFA(make_shape(n, m, k, 1)));
      } else {
        layout_sf_act.set(e, BS::Config::tile_atom_to_shape_SFA(make_shape(m, n, k, 1)));
        layout_sf_weight.set(e, BS::Config::tile_atom_to_shape_SFB(make_shape(m, n, k, 1)));
      }
      ptr_sf_act.set(e, ops.a_sf.as<GemmInput::ElementSF>() + act_sf_offset<BS>(e, offset, p.k));
      ptr_sf_weight.set(e, ops.b_sf.as<GemmInput::ElementSF>() + weight_sf_offset<BS>(e, p.n, p.k));
    }
    ptr_act.set(e, ops.a.as<char>() + storage_bytes(offset * p.k, C::act_bits));
    ptr_weight.set(e, ops.b.as<char>() + storage_bytes(int64_t{e} * p.n * p.k, C::weight_bits));
    if (kFinalize) {
      ptr_index.set(e, ops.dest_row.as<int>() + offset);
      ptr_router.set(e, ops.router_scales.as<float>() + offset);
      if (p.bias) ptr_bias.set(e, ops.bias.as<char>() + storage_bytes(int64_t{e} * p.n, C::out_bits));
    } else {
      ptr_d.set(e, ops.d.as<char>() + storage_bytes(offset * p.n, C::out_bits));
    }
    if (C::d_scaled) ptr_sf_d.set(e, d_sf + act_sf_offset<BlockScale<2>>(e, offset, p.n));
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
  in.ptr_c = nullptr;  // "Always nullptr" (computeStridesTmaWarpSpecialized)
  in.stride_c = nullptr;
  in.alpha_scale_ptr_array = ops.alpha.bytes() == 0 ? nullptr : keep(setup, ptr_alpha);
  if constexpr (kBlockScaled) {
    in.fpX_block_scaling_factors_act = keep(setup, ptr_sf_act);
    in.fpX_block_scaling_factors_weight = keep(setup, ptr_sf_weight);
    in.fpX_block_scaling_factors_stride_act = keep(setup, layout_sf_act);
    in.fpX_block_scaling_factors_stride_weight = keep(setup, layout_sf_weight);
  }

  if (kFinalize) {
    // setFinalizeFusionParams(final_output, hidden_size, num_output_tokens, use_reduction)
    auto& fin = in.fused_finalize_epilogue;
    const int out_rows = static_cast<int>(p.out_rows);
    const int n = static_cast<int>(p.n);
    fin.ptr_final_output = ops.d.as<void>();
    fin.stride_final_output = cutlass::make_cute_packed_stride(
        GemmInput::FusedFinalizeEpilogue::StrideFinalOutput{}, cute::make_shape(out_rows, n, 1));
    fin.stride_final_output_transposed = cutlass::make_cute_packed_stride(
        GemmInput::FusedFinalizeEpilogue::StrideFinalOutput_T{}, cute::make_shape(n, out_rows, 1));
    fin.num_rows_in_final_output = out_rows;  // the scatter index is taken modulo this
    fin.shape_override = n;
    fin.use_reduction = p.use_reduction;
    fin.ptr_bias = p.bias ? keep(setup, ptr_bias) : nullptr;
    fin.ptr_router_scales = keep(setup, ptr_router);
    fin.ptr_source_token_index = keep(setup, ptr_index);
  } else {
#if TILECONFORM_HAS_ACTIVATION_FUSION
    if (C::activation) {
      // computeStridesTmaWarpSpecializedKernel + the runner's fused_activation_epilogue: the
      // model-wide limit, and for MXFP8 D the per-expert SF pointers and norm_constant 1
      auto& act = in.fused_activation_epilogue;
      act.clamp_limit = ops.clamp_limit.as<float>();
      if (C::d_scaled) {
        act.ptr_block_scaling_factors = keep(setup, ptr_sf_d);
        act.norm_constant = keep(setup, std::vector<float>{1.0f});
      }
    }
#endif
    in.ptr_d = keep(setup, ptr_d);
    in.stride_d = kSwapAB ? static_cast<void*>(keep(setup, stride_d_t))
                          : static_cast<void*>(keep(setup, stride_d));
  }
  return setup;
}

}  // namespace tileconform
