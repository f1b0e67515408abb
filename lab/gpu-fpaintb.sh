#!/usr/bin/env bash
# matrices/gemm-sm90-fpaintb.yaml (FlashInfer's SM90 fpA_intB GEMM, every tactic its runner offers,
# W4A16 bf16 per group of 128 and W8A16 fp16 per channel) judged on this host's GPU by the dense
# backend with --tile-update, cold (an empty build cache: the tactics probe and one unit per tactic
# and dtype are compiled here, all cores at a time): numerics on both input families, graph
# replays, repeats; then, if every case passed, rerun warm (the same cache, the updated matrix:
# every case must pass again) for the benchmark's warm figure. The matrix it updated, both
# reports, the logs and a summary come back as one tarball; the checkout takes the expectations
# with `tileconform report apply MATRIX REPORT` once the summary shows no case that failed to
# compile (a harness that cannot build must not become the kernels' verdicts).
#
#   [JOBS=N] lab/gpu-fpaintb.sh [PYTEST_K]   (PYTEST_K: a -k expression, e.g. bf16xint4 or fp16xint8;
#     none: the whole matrix, 42 units; JOBS: compiles at a time, default the CPU count)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/fpaintb"
rm -rf /tmp/tcfpaintb
export TILECONFORM_CACHE_DIR=/tmp/tcfpaintb
. "$(dirname "$0")/gpu-env.sh"
# the dense backend's entry point: the checkout is on PYTHONPATH, not installed
plugins+=(-p pytest_tileconform.flashinfer_dense.plugin)
MATRIX=matrices/gemm-sm90-fpaintb.yaml
nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
judge() {  # NAME LIMIT_S [PYTEST ARGS...]: one timed pytest run into $OUT/fpaintb/NAME.*
  local name=$1 limit=$2 start; shift 2; start=$(date +%s.%N)
  timeout "$limit" python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix "$MATRIX" \
    --tile-device hardware --tile-build-jobs "${JOBS:-$(nproc)}" ${K:+-k "$K"} \
    --tile-report "$OUT/fpaintb/$name.json" "$@" > "$OUT/fpaintb/$name.log" 2>&1
  echo "$name: rc=$? $(python3 -c "import time; print(round(time.time() - $start, 1))") s" | tee -a "$OUT/fpaintb/summary.txt"
  tail -3 "$OUT/fpaintb/$name.log"
  python3 - "$OUT/fpaintb/$name.json" <<'PY' | tee -a "$OUT/fpaintb/summary.txt"
import collections, json, sys
try:
    cases = json.load(open(sys.argv[1]))["cases"]
except (OSError, ValueError) as exc:
    sys.exit(f"no report: {exc}")
by = collections.Counter((c["outcome"], (c.get("verdict") or {}).get("failed_stage")) for c in cases)
print(len(cases), "cases:", dict(by), "first verdict at", cases[0].get("finished_at_s"), "s")
for c in cases:
    v = c.get("verdict") or {}
    if v.get("failed_stage"):
        print(c["id"], v["failed_stage"], v.get("status", ""), str(v.get("detail", ""))[:300])
PY
}
K=${1:-}
# leave the device call (600 s) time to pack what it has if the compile runs long
judge cold "${LIMIT_S:-420}" --tile-update
if ! grep -q "failed" "$OUT/fpaintb/summary.txt" && grep -q "cases:" "$OUT/fpaintb/summary.txt"; then
  judge warm "${WARM_LIMIT_S:-90}"
fi
cp "$MATRIX" "$OUT/fpaintb/"
tar -czf "$OUT/fpaintb.tar.gz" -C "$OUT" fpaintb && rm -rf "$OUT/fpaintb"
