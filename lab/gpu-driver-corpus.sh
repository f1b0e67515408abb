#!/usr/bin/env bash
# The driver conformance corpus: pytest_tileconform/virtual/conformance/probe.cu built against
# the real CUDA runtime and run on this host's GPU, restarted after any call that ends its
# context, until every call has its line (record.py). The corpus is what vcudart's sm90 profile
# must answer exactly: tests/virtual/test_driver_corpus.py replays it on the CPU.
#
#   lab/gpu-driver-corpus.sh    (writes $OUT/driver-corpus-h200.jsonl.gz, default ./gpu-out;
#                                    commit it as pytest_tileconform/virtual/conformance/driver-corpus-h200.jsonl.gz)
#
# Needs only nvcc and python3 (no CUTLASS, no package install), so it does not source gpu-env.sh.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
{ "$NVCC" --version; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; } > "$OUT/driver-corpus-env.txt" 2>&1
s=$(date +%s)
python3 pytest_tileconform/virtual/conformance/record.py "$OUT/driver-corpus-h200.jsonl.gz" "$NVCC" \
  > "$OUT/driver-corpus-summary.txt" 2> "$OUT/driver-corpus-record.log"
rc=$?
echo "built and recorded in $(( $(date +%s) - s )) s, rc=$rc"
tail -20 "$OUT/driver-corpus-record.log"
cat "$OUT/driver-corpus-summary.txt"
ls -l "$OUT/driver-corpus-h200.jsonl.gz"
exit $rc
