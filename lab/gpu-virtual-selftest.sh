#!/usr/bin/env bash
# pytest_tileconform/virtual/runtime/selftest.cu against the real CUDA runtime on this host's
# GPU: the lines tests/virtual/test_virtual_runtime.py holds vcudart's sm90 profile to
# (runtime/selftest_h200.jsonl). Built with the flags that test uses for its vcudart build.
#
#   lab/gpu-virtual-selftest.sh   (writes $OUT/selftest_h200.jsonl and the build log, default
#                                      ./gpu-out; commit it as pytest_tileconform/virtual/runtime/selftest_h200.jsonl)
#
# Needs only nvcc: it does not source gpu-env.sh.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{ "$NVCC" --version; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; } > "$OUT/selftest-env.txt" 2>&1
"$NVCC" -O2 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_120a,code=sm_120a \
  pytest_tileconform/virtual/runtime/selftest.cu -o "$work/selftest" > "$OUT/selftest-build.log" 2>&1 \
  || { cat "$OUT/selftest-build.log"; exit 1; }
"$work/selftest" > "$OUT/selftest_h200.jsonl"
rc=$?
echo "selftest rc=$rc, $(wc -l < "$OUT/selftest_h200.jsonl") lines"
diff pytest_tileconform/virtual/runtime/selftest_h200.jsonl "$OUT/selftest_h200.jsonl" && echo "same as the committed file"
exit $rc
