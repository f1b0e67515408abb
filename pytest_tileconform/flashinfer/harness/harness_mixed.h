// SM90's mixed-input launcher (moe_gemm_tma_ws_mixed_input_launcher.inl): the weight interleave
// FlashInfer's binding applies before any GEMM (interleave_moe_weights_for_sm90_mixed_gemm), the
// group scales in the layout the release's launcher reads, and the launcher's input as
// TensorRT-LLM's runner builds it (cutlass_fused_moe_kernels.cuh:
// computeStridesTmaWarpSpecialized with int4_groupwise_params, and the precomputed tile
// scheduler's workspace). Included by the translation units of mixed-input cases only, after
// harness.cu, which declares these functions.
//
// Two generations of the launcher (features.py reads which from the release's sources):
// - TILECONFORM_MIXED_INTERLEAVED_WEIGHTS: the mainloop reads B through LDSM in the layout
//   FlashInfer's interleave kernels make (0.6.12 on); without it (0.5.3 - 0.6.6) B is read as
//   stored, N x K with K contiguous, and nothing is interleaved.
// - TILECONFORM_MIXED_PACKED_SCALES: the launcher reads its scales as ElementScalePacked, the
//   CTA_K / group scales of one weight row and one K tile in one element (PackedScalesNum =
//   get<2>(CTAShape{}) / group_size), pack (n, k tile) at k_tile * N + n (its StrideSFA
//   (1, N, ...) in packs; TensorRT-LLM's load_quant_scales interleave, FlashInfer 0.6.12's
//   interleave_moe_scales_for_sm90_mixed_gemm for CTA_K 128); without it (0.6.16 on, not 0.6.17)
//   one scale per element, folded in 64 x 128 blocks. b_scale.bin / the shared operand is always
//   the folded form (it does not depend on the tile, so every case of a problem shares it); the
//   packed one is made from it here, for the case's CTA_K.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tileconform {

// B in the kernel's layout, one expert at a time, by FlashInfer's own kernels (quant_type 0
// int4, 1 fp4 for bf16 activations, 2 fp4 for fp8 with its pre-processed signs).
template <class C>
DeviceBuffer interleave_weights(const DeviceBuffer& b, const ProblemInfo& p) {
#if !TILECONFORM_MIXED_INTERLEAVED_WEIGHTS
  (void)p;  // this release's mainloop reads B as stored
  return DeviceBuffer::borrowed(b.as<void>(), b.bytes());
#else
  namespace tk = tensorrt_llm::kernels::cutlass_kernels;
  if (p.n % 16 != 0 || p.k % 64 != 0) {
    bad_input("problem.txt: FlashInfer's weight interleave needs n % 16 == 0 and k % 64 == 0");
  }
  DeviceBuffer out(b.bytes());
  const size_t per_expert = storage_bytes(p.n * p.k, C::weight_bits);
  const int n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  for (int e = 0; e < p.experts; ++e) {
    uint8_t* src = b.as<uint8_t>() + e * per_expert;
    uint8_t* dst = out.as<uint8_t>() + e * per_expert;
    // each kernel only where the release has it (features.missing_piece keeps the others out)
    static_assert((C::interleave == 0 && TILECONFORM_HAS_INTERLEAVE_0) ||
                      (C::interleave == 1 && TILECONFORM_HAS_INTERLEAVE_1) ||
                      (C::interleave == 2 && TILECONFORM_HAS_INTERLEAVE_2),
                  "this FlashInfer release has no interleave kernel for the case's pair");
#if TILECONFORM_HAS_INTERLEAVE_0
    if constexpr (C::interleave == 0) tk::interleave_int4_weights_for_sm90_mixed_gemm(src, dst, n, k, nullptr);
#endif
#if TILECONFORM_HAS_INTERLEAVE_1
    if constexpr (C::interleave == 1) tk::interleave_fp4_weights_for_sm90_mixed_gemm(src, dst, n, k, nullptr);
#endif
#if TILECONFORM_HAS_INTERLEAVE_2
    if constexpr (C::interleave == 2) tk::interleave_fp4_fp8_weights_for_sm90_mixed_gemm(src, dst, n, k, nullptr);
#endif
  }
  check_cuda(cudaGetLastError(), "interleave_*_weights_for_sm90_mixed_gemm (launch)");
  check_cuda(cudaDeviceSynchronize(), "interleave_*_weights_for_sm90_mixed_gemm");
  return out;
#endif
}

// One scale of every expert's E x N x K/group: from its place in the folded form (numerics/
// mixed.py fold_scales: per 64 rows and 128 K, folded_m rows of m_slices x per_k128 scales) to
// its place in the packed one (pack of `pack` scales (n, k tile) at k_tile * n_rows + n).
template <class T>
__global__ void tileconform_pack_scales(const T* folded, T* packed, int64_t total, int64_t n_rows,
                                        int64_t groups, int per_k128, int m_slices, int pack) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int folded_m = 64 / m_slices;
  const int64_t k128 = groups / per_k128;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t e = i / (n_rows * groups), r = i / groups % n_rows, g = i % groups;
    const int64_t in64 = r % 64, ms = in64 / folded_m, fm = in64 % folded_m;
    const int64_t src =
        ((((e * (n_rows / 64) + r / 64) * k128 + g / per_k128) * folded_m + fm) * m_slices + ms) * per_k128 +
        g % per_k128;
    packed[e * n_rows * groups + (g / pack * n_rows + r) * pack + g % pack] = folded[src];
  }
}

// The scales as the release's launcher reads them: the folded operand itself, or (packed
// generation) a copy packed for the case's CTA_K.
template <class C>
DeviceBuffer kernel_scales(const DeviceBuffer& folded, const ProblemInfo& p) {
#if !TILECONFORM_MIXED_PACKED_SCALES
  (void)p;
  return DeviceBuffer::borrowed(folded.as<void>(), folded.bytes());
#else
  constexpr int pack = C::tile_k / C::group, per_k128 = 128 / C::group, m_slices = 16 / C::scale_bytes / per_k128;
  static_assert(pack >= 1 && C::tile_k % C::group == 0, "CTA_K is a whole number of scale groups");
  const int64_t groups = p.k / C::group;
  if (groups % pack != 0) {
    bad_input("problem.txt: this FlashInfer release packs " + std::to_string(pack) +
              " scales per CTA K (ElementScalePacked): k must be a multiple of the tile's K " +
              std::to_string(C::tile_k));
  }
  DeviceBuffer out(folded.bytes());
  const int64_t total = int64_t{p.experts} * p.n * groups;
  using T = std::conditional_t<C::scale_bytes == 2, uint16_t, uint8_t>;
  tileconform_pack_scales<T><<<256, 256>>>(folded.as<T>(), out.as<T>(), total, p.n, groups, per_k128, m_slices, pack);
  check_cuda(cudaGetLastError(), "tileconform_pack_scales (launch)");
  check_cuda(cudaDeviceSynchronize(), "tileconform_pack_scales");
  return out;
#endif
}

// Every expert gets its problem shape (N x M x K: the weight is CUTLASS's A) and its weight
// pointer and stride (the kernel builds one 3-D descriptor from expert 0's); only experts with
// rows get activation, D, scale and alpha pointers, as in TensorRT-LLM. alpha_scales is the
// per-expert alpha (W4A8), the per-row token scales (fp8 x MXFP4, pre-MMA) or null (bf16 x MXFP4,
// which the launcher gives alpha 1).
template <class C>
GemmSetup make_mixed_input(const ProblemInfo& p, const Operands& ops) {
  using Params = GemmInput::INT4GroupwiseParams;
  using Shape = Params::ProblemShapeInt::UnderlyingProblemShape;
  using cute::make_shape;
  using cutlass::make_cute_packed_stride;
  const int E = p.experts;
  const int n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  GemmSetup setup;
  GemmInput& in = setup.input;
  in.swap_ab = true;
  in.enable_pdl = p.enable_pdl;

  std::vector<Shape> shapes;
  std::vector<GemmInput::StrideA> stride_weight;
  std::vector<const void*> ptr_weight;
  PerExpert<GemmInput::StrideB> stride_act(E, p.poison);
  PerExpert<GemmInput::StrideD_T> stride_d(E, p.poison);
  PerExpert<const void*> ptr_act(E, p.poison);
  PerExpert<void*> ptr_d(E, p.poison);
  PerExpert<const Params::SFA*> ptr_scale(E, p.poison);
  PerExpert<Params::StrideSFA> stride_scale(E, p.poison);
  PerExpert<const float*> ptr_alpha(E, p.poison);
  const int64_t scales_per_expert = p.n * (p.k / C::group);
  const bool has_alpha = C::pre_mma ? ops.token_scales.bytes() > 0 : ops.alpha.bytes() > 0;

  int64_t offset = 0;
  for (int e = 0; e < E; ++e) {
    const int m = static_cast<int>(p.rows[e]);
    shapes.push_back(Shape(n, m, k));
    ptr_weight.push_back(ops.b_packed.as<char>() + storage_bytes(int64_t{e} * p.n * p.k, C::weight_bits));
    stride_weight.push_back(make_cute_packed_stride(GemmInput::StrideA{}, make_shape(n, k, 1)));
    if (m == 0) continue;
    stride_act.set(e, make_cute_packed_stride(GemmInput::StrideB{}, make_shape(m, k, 1)));
    stride_d.set(e, make_cute_packed_stride(GemmInput::StrideD_T{}, make_shape(n, m, 1)));
    ptr_act.set(e, ops.a.as<char>() + storage_bytes(offset * p.k, C::act_bits));
    ptr_d.set(e, ops.d.as<char>() + storage_bytes(offset * p.n, C::out_bits));
    ptr_scale.set(e, reinterpret_cast<const Params::SFA*>(ops.b_scale_kernel.as<char>() +
                                                          e * scales_per_expert * C::scale_bytes));
    stride_scale.set(e, cute::make_stride(cute::_1{}, int64_t{p.n}, scales_per_expert));
    if (has_alpha) {
      ptr_alpha.set(e, C::pre_mma ? ops.token_scales.as<float>() + offset : ops.alpha.as<float>() + e);
    }
    offset += p.rows[e];
  }

  auto& groupwise = in.int4_groupwise_params;
  groupwise.enabled = true;
  groupwise.use_wfp4a16 = C::interleave == 1;
  groupwise.shape.num_groups = E;
  groupwise.shape.problem_shapes = keep(setup, shapes);
  groupwise.shape.host_problem_shapes = nullptr;  // as the runner: device shapes only
  groupwise.ptr_s_a = keep(setup, ptr_scale);
  groupwise.stride_s_a = keep(setup, stride_scale);
  in.ptr_weight = keep(setup, ptr_weight);
  in.stride_weight = keep(setup, stride_weight);
  in.ptr_act = keep(setup, ptr_act);
  in.stride_act = keep(setup, stride_act);
  in.ptr_d = keep(setup, ptr_d);
  in.stride_d = keep(setup, stride_d);
  in.ptr_c = nullptr;
  in.stride_c = nullptr;
  in.alpha_scale_ptr_array = has_alpha ? keep(setup, ptr_alpha) : nullptr;

#if TILECONFORM_HAS_PRECOMPUTED_SCHEDULER
  // The precomputed scheduler's buffer, sized as the runner sizes it for its largest GEMM; the
  // launcher fills it (work tiles, TMA descriptors) before each run; releases without the
  // field have no such scheduler.
  namespace detail = tensorrt_llm::kernels::cutlass_kernels_oss::detail;
  const int64_t total = p.total_rows();
  in.precomputed_scheduler_workspace_size = detail::precomputed_scheduler_workspace_size(E, total, p.n);
  setup.buffers.emplace_back(in.precomputed_scheduler_workspace_size);
  in.precomputed_scheduler_workspace = setup.buffers.back().as<uint8_t>();
  in.precomputed_scheduler_total_routed_tokens = total;
#endif
  setup.d_base = ops.d.as<void>();
  return setup;
}

}  // namespace tileconform
