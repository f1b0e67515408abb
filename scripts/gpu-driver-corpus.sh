#!/usr/bin/env bash
# The driver conformance corpus: pytest_tileconform/virtual/conformance/probe.cu built against
# the real CUDA runtime and run on this host's GPU, restarted after any call that ends its
# context, until every call has its line. The corpus is what vcudart's sm90 profile must answer
# exactly (tests/test_driver_corpus.py replays it on the CPU).
#
#   scripts/gpu-driver-corpus.sh    (writes $OUT/driver-corpus-h200.jsonl.gz, default ./gpu-out;
#                                    SEED and COUNT as in the committed corpus unless set)
#
# Needs only nvcc and python3 (no CUTLASS, no package): it does not source gpu-env.sh.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
SEED=${SEED:-20261201}
COUNT=${COUNT:-12000}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
HERE=pytest_tileconform/virtual/conformance
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{ "$NVCC" --version; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv; } > "$OUT/driver-corpus-env.txt" 2>&1
s=$(date +%s)
# the flags tests/test_driver_corpus.py uses for the vcudart build, less --cudart=none
if ! "$NVCC" -O1 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --no-compress \
    -o "$work/probe" "$HERE/probe.cu" > "$OUT/driver-corpus-build.log" 2>&1; then
  cat "$OUT/driver-corpus-build.log"; exit 1
fi
echo "built in $(( $(date +%s) - s )) s"
s=$(date +%s)
python3 "$HERE/record.py" "$work/probe" "$SEED" "$COUNT" "$OUT/driver-corpus-h200.jsonl.gz" \
  > "$OUT/driver-corpus-summary.txt" 2> "$OUT/driver-corpus-record.log"
rc=$?
echo "recorded in $(( $(date +%s) - s )) s, rc=$rc"
tail -5 "$OUT/driver-corpus-record.log"
cat "$OUT/driver-corpus-summary.txt"
ls -l "$OUT/driver-corpus-h200.jsonl.gz"
exit $rc
