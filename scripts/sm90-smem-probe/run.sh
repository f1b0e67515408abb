#!/usr/bin/env bash
# The shared memory every SM90 MoE GEMM configuration in list.inc asks for, from the launcher's
# own types (moe_gemm_tma_ws_launcher.inl's SM90 branch written out in probe.cu): stage count,
# sizeof of the epilogue's SharedStorage and TensorStorage, where the kernel's SharedStorage
# ends (raw) and its size (what initialize() asks cudaFuncSetAttribute for). Host code only, no
# kernel is instantiated; about 6 minutes and 3 GB for the 107 lines of list.inc.
#
#   scripts/sm90-smem-probe/run.sh FLASHINFER_DATA_DIR > sweep.txt
#
# sweep-flashinfer-0.7.4.txt is its output for FlashInfer 0.7.4 with nvcc 13.0; why it shows
# that initialize cannot fail on SM90 is in matrices/sm90-failures.yaml.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=$1
nv=$data/csrc/nv_internal
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -std=c++17 -DNDEBUG -O0 --expt-relaxed-constexpr \
  -gencode=arch=compute_90a,code=sm_90a -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED \
  -DCOMPILE_HOPPER_TMA_GEMMS -DCOMPILE_HOPPER_TMA_GROUPED_GEMMS -DENABLE_BF16 -DENABLE_FP8 \
  -DENABLE_FP4 -DUSING_OSS_CUTLASS_MOE_GEMM -DCUTLASS_ENABLE_GDC_FOR_SM90=1 \
  -I"$here" -I"$nv" -I"$nv/include" -I"$nv/tensorrt_llm/cutlass_extensions/include" \
  -I"$nv/tensorrt_llm/kernels/cutlass_kernels/include" -I"$nv/tensorrt_llm/kernels/cutlass_kernels" \
  -isystem "$data/include" -isystem "$data/csrc" -isystem "$data/cutlass/include" \
  -isystem "$data/cutlass/tools/util/include" -isystem "$data/spdlog/include" \
  "$here/probe.cu" "$nv/cpp/common/tllmException.cpp" "$nv/cpp/common/stringUtils.cpp" \
  "$nv/cpp/common/logger.cpp" -o "$work/probe"
"$work/probe"
