// SM90's mixed-input launcher (moe_gemm_tma_ws_mixed_input_launcher.inl): the weight interleave
// FlashInfer's binding applies before any GEMM (interleave_moe_weights_for_sm90_mixed_gemm) and
// the launcher's input as TensorRT-LLM's runner builds it (cutlass_fused_moe_kernels.cuh:
// computeStridesTmaWarpSpecialized with int4_groupwise_params, and the precomputed tile
// scheduler's workspace). Included by the translation units of mixed-input cases only, after
// harness.cu, which declares these two functions.
#pragma once

#include <cstdint>
#include <vector>

namespace tileconform {

// B in the kernel's layout, one expert at a time, by FlashInfer's own kernels (quant_type 0
// int4, 1 fp4 for bf16 activations, 2 fp4 for fp8 with its pre-processed signs).
template <class C>
DeviceBuffer interleave_weights(const DeviceBuffer& b, const ProblemInfo& p) {
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
    ptr_scale.set(e, reinterpret_cast<const Params::SFA*>(ops.b_scale.as<char>() +
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
