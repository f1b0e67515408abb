#!/usr/bin/env bash
# matrices/sm90.yaml (2,880 cases, 360 instantiations) through the sequence stage on this host's
# GPU: each case's checked run, the default graph and repeat stages, then --tile-sequence N (N runs
# of the case alone back to back, N GEMM 1 (none) -> GEMM 2 (finalize) pairs of its tile on one
# workspace and stream, one pair captured in a CUDA graph and replayed N times; every D compared
# with the serialized run's on the device), operands in device memory, --tile-build-jobs 16:
#
#   lab/gpu-sequence-matrix.sh cold A  # bf16 + fp16 (1,152 cases, 144 instantiations) from an empty
#                                      # cache, then one DeepSeek-V3 prefill case (GEMM 2: 131,072 rows
#                                      # x 7,168 x 2,048, finalize top-8; 128x128x64, PDL on, sm90.yaml's
#                                      # unit) at N = MODEL_N, 5 timed calls
#   lab/gpu-sequence-matrix.sh cold B  # fp8_e4m3 (bf16 and fp16 out) + fp32 (1,728 cases, 216)
#   lab/gpu-sequence-matrix.sh warm    # all 2,880 from the filled cache, 3 timed calls a case (what
#                                      # the sequence costs beside its GEMMs), then $REMOTE if set
#
# One device call each, in this order, each issued as soon as the last returns: the build cache
# ($TILECONFORM_CACHE_DIR, /tmp/tc-seq) lives on the machine only while it is held.
# N (10): --tile-sequence of the matrix. LIMIT: seconds a pytest may run before SIGINT (its report
# is still written; cold 560, warm 400). MODEL_N (1000), MODEL_LIMIT (150; 0 leaves the model
# case out). REMOTE: a command run after the warm run in this shell (it sees the cache).
# Into $OUT: seq-NAME.json.gz and seq-NAME.log (NAME: cold-A, cold-B, model, warm) and
# seq-PHASE[-SLICE]-summary.txt (counts, failures, seconds; a line per check, OK or BAD).
set -uo pipefail
phase=${1:?cold A|cold B|warm} slice=${2:-}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
n=${N:-10}
export TILECONFORM_CACHE_DIR=${TILECONFORM_CACHE_DIR:-/tmp/tc-seq}
. "$(dirname "$0")/gpu-env.sh"
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-device hardware --tile-build-jobs 16)
M=matrices/sm90.yaml
step() {  # NAME LIMIT ARGS...: one pytest session, its wall time and its last lines
  local name=$1 limit=$2 s rc; shift 2; s=$(date +%s%N)
  timeout -s INT -k 30 "$limit" "${P[@]}" "$@" --tile-report "$OUT/seq-$name.json" > "$OUT/seq-$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc in $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$OUT/seq-times.txt"
  tail -3 "$OUT/seq-$name.log"
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "cpus $(nproc), $(free -g | awk '/Mem/{print $2}') GB"
  git log -1 --format='%h %s' 2>/dev/null | cut -c1-100; } | tee -a "$OUT/seq-times.txt"
case "$phase $slice" in
  "cold A")
    rm -rf "$TILECONFORM_CACHE_DIR"
    step cold-A "${LIMIT:-560}" --tile-matrix "$M" -k "sm90-bf16- or sm90-fp16-" --tile-sequence "$n"
    [ "${MODEL_LIMIT:-150}" = 0 ] || step model "${MODEL_LIMIT:-150}" --tile-matrix benchmarks/dsv3-prefill.yaml \
      -k "gemm2 and 128x128x64 and not nopdl" --tile-sequence "${MODEL_N:-1000}" --tile-graph-replays 0 \
      --tile-repeats 0 --tile-timing-iters 5
    reports=("cold-A:$n:1152" "model:${MODEL_N:-1000}:1") ;;
  "cold B")
    step cold-B "${LIMIT:-560}" --tile-matrix "$M" -k "fp8_e4m3 or sm90-fp32-" --tile-sequence "$n"
    reports=("cold-B:$n:1728") ;;
  "warm ")
    step warm "${LIMIT:-400}" --tile-matrix "$M" --tile-sequence "$n" --tile-timing-iters 3
    reports=("warm:$n:2880") ;;
  *) echo "usage: $0 cold A|cold B|warm" >&2; exit 2 ;;
esac
python3 benchmarks/sequence_summary.py "$OUT" "${reports[@]}" | tee "$OUT/seq-$phase${slice:+-$slice}-summary.txt"
for r in "${reports[@]}"; do [ -f "$OUT/seq-${r%%:*}.json" ] && gzip -f "$OUT/seq-${r%%:*}.json"; done
if [ "$phase" = warm ] && [ -n "${REMOTE:-}" ]; then
  s=$(date +%s); bash -c "$REMOTE"; echo "remote: exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/seq-times.txt"
fi
