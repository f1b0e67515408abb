// The SM90 branch of moe_gemm_tma_ws_launcher.inl (FlashInfer 0.7.4, lines 352-569), its types
// written out for one configuration per P(...) line of list.inc, printing what initialize() would
// ask for. Host code only: no kernel is instantiated. Run by run.sh.
#include "tensorrt_llm/kernels/cutlass_kernels/moe_gemm/launchers/moe_gemm_tma_ws_launcher.inl"
#include <cstdio>
#include <cstddef>
using namespace tensorrt_llm::kernels::cutlass_kernels;
using namespace cute;
template <class T, class OutputType, int M, int N, int K, int CM, int CN, bool IsFinalizeFusion, bool SwapAB>
struct Probe {
  using ArchTag = cutlass::arch::Sm90;
  using MmaTileShape = Shape<Int<M>, Int<N>, Int<K>>;
  using ClusterShape = Shape<Int<CM>, Int<CN>, _1>;
  using ElementType = typename TllmToCutlassTypeAdapter<T>::type;
  using ElementAct = ElementType; using ElementWeight = ElementType;
  using DefaultElementD = typename TllmToCutlassTypeAdapter<TmaWarpSpecializedGroupedGemmInput::OutputTypeAdaptor_t<OutputType>>::type;
  using ElementD = DefaultElementD;
  using ElementFinalOutput = typename TllmToCutlassTypeAdapter<OutputType>::type;
  using ElementC = void; using ElementAccumulator = float; using ElementBias = ElementFinalOutput; using ElementRouterScales = float;
  static constexpr int AlignmentAct = 128 / cutlass::sizeof_bits<ElementAct>::value;
  static constexpr int AlignmentWeight = AlignmentAct;
  static constexpr int AlignmentC = AlignmentAct;
  static constexpr int AlignmentD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using EpilogueOp = cutlass::epilogue::fusion::LinearCombination<ElementD, ElementAccumulator, ElementC, ElementAccumulator>;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using LayoutC = std::conditional_t<SwapAB, TmaWarpSpecializedGroupedGemmInput::LayoutC_T, TmaWarpSpecializedGroupedGemmInput::LayoutC>;
  using LayoutD = std::conditional_t<SwapAB, TmaWarpSpecializedGroupedGemmInput::LayoutD_T, TmaWarpSpecializedGroupedGemmInput::LayoutD>;
  using CollectiveEpilogueDefault = typename cutlass::epilogue::collective::CollectiveBuilder<ArchTag, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator, ElementC, LayoutC*, AlignmentC, ElementD, LayoutD*, AlignmentD, EpilogueSchedule, EpilogueOp>::CollectiveOp;
  using EpilogueFusionOp = std::conditional_t<SwapAB,
      cutlass::epilogue::fusion::ScaledAccPerRowBiasPerColScaleScatter<LayoutD, ElementFinalOutput, ElementAccumulator, ElementBias, ElementRouterScales>,
      cutlass::epilogue::fusion::ScaledAccPerColBiasPerRowScaleScatter<LayoutD, ElementFinalOutput, ElementAccumulator, ElementBias, ElementRouterScales>>;
  using CollectiveEpilogueFinalize = typename cutlass::epilogue::collective::CollectiveBuilder<ArchTag, cutlass::arch::OpClassTensorOp, MmaTileShape, ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator, ElementC, LayoutC*, AlignmentC, void, LayoutD*, AlignmentD, EpilogueSchedule, EpilogueFusionOp>::CollectiveOp;
  using CollectiveEpilogue = std::conditional_t<IsFinalizeFusion, CollectiveEpilogueFinalize, CollectiveEpilogueDefault>;
  using StageCountAutoCarveout = cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>;
  static constexpr bool IsFP8 = cutlass::platform::is_same<T, __nv_fp8_e4m3>::value;
  using KernelSchedule = std::conditional_t<IsFP8, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<ArchTag, cutlass::arch::OpClassTensorOp, ElementAct, TmaWarpSpecializedGroupedGemmInput::LayoutA*, AlignmentAct, ElementWeight, TmaWarpSpecializedGroupedGemmInput::LayoutB*, AlignmentWeight, ElementAccumulator, MmaTileShape, ClusterShape, StageCountAutoCarveout, KernelSchedule>::CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<TmaWarpSpecializedGroupedGemmInput::ProblemShape, CollectiveMainloop, CollectiveEpilogue, void, void>;
  static void print(const char* name) {
    using SS = typename GemmKernel::SharedStorage;
    std::printf("%s stages=%d epi=%zu epi_tensors=%zu raw=%zu smem=%d\n", name, (int)CollectiveMainloop::DispatchPolicy::Stages,
                sizeof(typename CollectiveEpilogue::SharedStorage), sizeof(typename CollectiveEpilogue::TensorStorage),
                offsetof(SS, tensormaps) + sizeof(typename SS::TensorMapStorage), (int)GemmKernel::SharedStorageSize);
  }
};
#define P(T,O,M,N,K,F,S) Probe<T,O,M,N,K,1,1,F,S>::print(#T " " #O " " #M "x" #N "x" #K " fin=" #F " swap=" #S);
int main() {
#include "list.inc"
}
