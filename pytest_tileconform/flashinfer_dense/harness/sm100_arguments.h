// What every SM100 dense harness shares past dense_verdict.h: its arguments, RUN_DIR SWAP_AB M N K,
// then the tactic's scheduler and cluster shape where not data-parallel 1x1x1 (the backend passes
// them only then), and its main. SM100's runners offer neither swap_ab nor stream-K: a case asking
// for either is refused, not judged as another tactic.
//
// A family's harness defines, in tileconform_dense, operand_bytes(m, n, k) (its operands' bytes, in
// the order its launcher takes them) and launch(operands, m, n, k, config, workspace, bytes) (its
// cluster-shape dispatch, returning the workspace size), then includes this header last: main
// builds the tactic's configuration as the runners' getConfigs() do (the unit's
// TILECONFORM_TILE_NAME, AUTO schedules, the cluster shape) and drives it (dense_verdict.h's drive).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tileconform_dense {

inline bool sm100_arguments(int argc, char** argv, flashinfer::gemm::ClusterShape& cluster) {
  using flashinfer::gemm::ClusterShape;
  if (argc != 6 && argc != 7 && argc != 10) {
    std::fprintf(stderr, "usage: %s RUN_DIR SWAP_AB M N K [STREAM_K CLUSTER_M CLUSTER_N CLUSTER_K]\n",
                 argv[0]);
    return false;
  }
  if (std::atoi(argv[2]) != 0 || (argc > 6 && std::atoi(argv[6]) != 0)) {
    std::fprintf(stderr, "harness: SM100's runner has no swap_ab or stream-K tactic\n");
    return false;
  }
  int cm = argc == 10 ? std::atoi(argv[7]) : 1, cn = argc == 10 ? std::atoi(argv[8]) : 1;
  int ck = argc == 10 ? std::atoi(argv[9]) : 1;
  struct Named {
    int m, n, k;
    ClusterShape shape;
  };
  // the cluster shapes of cutlass_gemm_configs.h the SM100 dispatch switches on
  static const Named shapes[] = {
      {1, 1, 1, ClusterShape::ClusterShape_1x1x1}, {2, 1, 1, ClusterShape::ClusterShape_2x1x1},
      {1, 2, 1, ClusterShape::ClusterShape_1x2x1}, {2, 2, 1, ClusterShape::ClusterShape_2x2x1},
      {1, 4, 1, ClusterShape::ClusterShape_1x4x1}, {4, 1, 1, ClusterShape::ClusterShape_4x1x1},
      {4, 2, 1, ClusterShape::ClusterShape_4x2x1}, {2, 4, 1, ClusterShape::ClusterShape_2x4x1},
      {4, 4, 1, ClusterShape::ClusterShape_4x4x1},
  };
  for (Named const& s : shapes) {
    if (s.m == cm && s.n == cn && s.k == ck) {
      cluster = s.shape;
      return true;
    }
  }
  std::fprintf(stderr, "harness: cluster %dx%dx%d is no ClusterShape\n", cm, cn, ck);
  return false;
}

}  // namespace tileconform_dense

int main(int argc, char** argv) {
  using namespace tileconform_dense;
  using namespace flashinfer::gemm;
  ClusterShape cluster;
  if (!sm100_arguments(argc, argv, cluster)) return 2;
  int m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  CutlassGemmConfig config(CutlassTileConfigSM100::TILECONFORM_TILE_NAME, MainloopScheduleType::AUTO,
                           EpilogueScheduleType::AUTO, cluster);
  return drive(argv[1], operand_bytes(m, n, k), [&](auto const& operands, char* space, size_t size) {
    return launch(operands, m, n, k, config, space, size);
  });
}
