#!/usr/bin/env bash
# Compile lab/dense/mxfp8_sm120_t4.cu with the flags of FlashInfer's gen_gemm_sm120_module_cutlass_mxfp8
# (flashinfer/jit/gemm/core.py: compute_120f on CUDA >= 12.9, ENABLE_BF16, CUTLASS_ENABLE_GDC_FOR_SM100,
# COMMON_NVCC_FLAGS, build_cuda_cflags) against the installed FlashInfer's data/, link it with vcudart and
# run it on the built-in sm120 profile; prints each tactic's outcome and the shared memory it asked for.
# Usage (repository root, CPU machine): bash lab/dense/mxfp8-sm120-virtual.sh [PYTHON] [WORKDIR]
set -euo pipefail
PY=${1:-.venv/bin/python}
WORK=${2:-/tmp/dense-mxfp8-sm120}
mkdir -p "$WORK/randinc"
DATA=$("$PY" -c 'from pytest_tileconform.flashinfer.sources import find_sources; print(find_sources().root)')
# cutlass/util/reference/device/tensor_fill.h includes curand_kernel.h; FlashInfer's JIT finds it in the
# nvidia pip wheel's include directory, which is not the CUDA toolkit's here
CURAND=$("$PY" -c 'import nvidia, pathlib; print(next(pathlib.Path(p) for p in nvidia.__path__) / "cu13/include")')
ln -sf "$CURAND"/curand* "$WORK/randinc/"
flock /work/compile.lock /usr/bin/time -f "compile: %e s, %M KB" nvcc -std=c++17 \
  -gencode=arch=compute_120f,code=sm_120f -DFLASHINFER_ENABLE_FP8_E8M0 -DFLASHINFER_ENABLE_FP4_E2M1 \
  -DENABLE_BF16 -DCUTLASS_ENABLE_GDC_FOR_SM100=1 -DNDEBUG -O3 --expt-relaxed-constexpr \
  -static-global-template-stub=false -DFLASHINFER_ENABLE_F16 -DFLASHINFER_ENABLE_BF16 \
  -DFLASHINFER_ENABLE_FP8_E4M3 -DFLASHINFER_ENABLE_FP8_E5M2 \
  -isystem "$DATA/include" -isystem "$DATA/csrc" -isystem "$DATA/cutlass/include" \
  -isystem "$DATA/cutlass/tools/util/include" -isystem "$DATA/spdlog/include" -isystem "$WORK/randinc" \
  -I"$DATA/cccl/cub" -I"$DATA/cccl/libcudacxx/include" -I"$DATA/cccl/thrust" \
  -c lab/dense/mxfp8_sm120_t4.cu -o "$WORK/t4.o"
"$PY" - "$WORK" <<'PYEOF'
import subprocess, sys
from pathlib import Path
from pytest_tileconform.flashinfer.sources import find_cuda_home
from pytest_tileconform.virtual.build import build_runtime
from pytest_tileconform.virtual.profiles import builtin
from pytest_tileconform.virtual.run import run_virtual
work = Path(sys.argv[1])
runtime = build_runtime(work / "cache", find_cuda_home())
subprocess.run(["nvcc", "--cudart=none", str(work / "t4.o"), str(runtime), "-o", str(work / "t4")], check=True)
run = run_virtual(work / "t4", [], work / "run", builtin("sm120"))
print(run.stdout, end="")
for call in run.calls("cudaFuncSetAttribute"):
    print(f"cudaFuncSetAttribute {call['value']} B -> {call['result']}")
print("refusals:", len(run.refusals), "image:", run.image, "exit:", run.returncode)
PYEOF
