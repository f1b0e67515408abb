#!/usr/bin/env bash
# The reference on this host's GPU (issue 17 items 1 and 7): the expected D computed on CUDA must
# equal the CPU's bit for bit for every generated dtype and fusion, then the time to make the
# inputs, compute the expected D and compare a D against it at DeepSeek-V3 and Mixtral prefill
# sizes (bf16 and fp8), and the numerics tests with torch's CUDA build.
#
#   lab/gpu-reference.sh      (output goes to $OUT, default ./gpu-out)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu-env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
python3 benchmarks/reference_device.py --device cuda --json "$OUT/reference-device.json" 2>&1 | tee "$OUT/reference-device.log"
python3 -m pytest -q -p no:cacheprovider -p no:xdist tests/flashinfer/numerics/test_numerics_mutations.py tests/flashinfer/numerics/test_tolerance.py \
  tests/flashinfer/numerics/test_reference.py tests/flashinfer/numerics/test_prepared.py > "$OUT/numerics-tests.log" 2>&1; echo "numerics tests rc=$?"; tail -2 "$OUT/numerics-tests.log"
