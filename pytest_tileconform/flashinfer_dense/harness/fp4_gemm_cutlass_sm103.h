// The harness of fp4_gemm_cutlass_sm103 (NVFP4 x NVFP4 on SM103), with TILECONFORM_T,
// TILECONFORM_CTA_M/N/K and TILECONFORM_TILE_NAME defined by the unit. A K768 tile's unit is one
// file: FlashInfer's fp4_gemm_cutlass_sm103.jinja rendered (the SM103 mainloop, a launcher per
// cluster shape), then this harness. A K128/K256 tile's unit is three parts compiled apart and
// linked (unit.py): fp4_gemm_cutlass.jinja and fp4_gemm_cutlass_sm103_generic_store256.jinja
// rendered (the TMA and the 256-bit-store epilogues, which include one header in two namespaces),
// and this harness alone, which names their launchers without instantiating them.
//
// Its launch is what the runner's dispatchNVFP4xNVFP4GemmCTAShapeSm100
// (fp4_gemm_cutlass_template_sm103.h) does for the unit's tile: a K768 tile through
// dispatchNVFP4xNVFP4GemmClusterShapeSm103; the others through that header's
// dispatchNVFP4xNVFP4GemmClusterShapeSm100, whose workspace query asks both epilogues and whose call
// runs the 256-bit-store epilogue on an output aligned for it (this harness's output comes from
// cudaMalloc: aligned whenever N times the output type's size is a multiple of 32 bytes), else the
// TMA one. A K768 tile on an output not so aligned the runner reroutes to the 128x128x256 TMA
// kernel, which is not in its unit: refused (no verdict.json), never judged as another kernel.
// sm100_arguments.h's main drives it: a workspace query (null pointers), then the call that runs
// get_workspace_size, can_implement, initialize and run.
// Usage: harness RUN_DIR SWAP_AB M N K [STREAM_K CLUSTER_M CLUSTER_N CLUSTER_K]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>

// first: dense_verdict.h names the CTA shape as CuTe's integers
#include "flashinfer/gemm/fp4_gemm_cutlass_template_sm103.h"
//
#include "dense_verdict.h"

namespace tileconform_dense {
using namespace flashinfer::gemm;

inline auto operand_bytes(int m, int n, int k) {
  return block_scaled_bytes<TILECONFORM_T, BlockScaled::nvfp4>(m, n, k);
}

template <typename Operands>
size_t launch(Operands const& operand, int m, int n, int k, CutlassGemmConfig config, char* space,
              size_t bytes) {
  auto [a, b, d, sfa, sfb, alpha] = operand;
  auto* out = static_cast<TILECONFORM_T*>(d);
  auto const* global = static_cast<float const*>(alpha);
  if constexpr (TILECONFORM_CTA_K == 768) {
    if (out != nullptr && !isStore256OutputAligned(out, n)) {
      std::fprintf(stderr,
                   "harness: N=%d: the runner runs this K768 tactic as the 128x128x256 TMA kernel "
                   "(an output not aligned for 256-bit stores), which this unit does not hold\n",
                   n);
      std::exit(2);
    }
    return dispatchNVFP4xNVFP4GemmClusterShapeSm103<TILECONFORM_T, CtaM, CtaN, CtaK>(
        out, a, b, sfa, sfb, global, m, n, k, 1, config, space, bytes, nullptr);
  } else {
    return dispatchNVFP4xNVFP4GemmClusterShapeSm100<TILECONFORM_T, CtaM, CtaN, CtaK>(
        out, a, b, sfa, sfb, global, m, n, k, 1, config, space, bytes, nullptr);
  }
}

}  // namespace tileconform_dense

#include "sm100_arguments.h"
