#!/usr/bin/env bash
# matrices/gemm-sm90-fpaintb.yaml (FlashInfer's SM90 fpA_intB GEMM, every tactic its runner offers,
# W4A16 bf16 per group of 128 and W8A16 fp16 per channel) judged on this host's GPU by the dense
# backend with --tile-update, cold (an empty build cache: the tactics probe and one unit per tactic
# and dtype are compiled here, all cores at a time): numerics on both input families, graph
# replays, repeats. The matrix it updated, the report, the log and a summary come back as one
# tarball; the checkout takes the expectations with `tileconform report apply MATRIX REPORT...`
# (the slices' reports in one write) once the summary shows no case that failed to compile (a
# harness that cannot build must not become the kernels' verdicts). One slice (-k) per device
# call: each is 21 units (the unit of tactic 13 took 139 s wall on the shared 2-core CPU machine).
#
#   lab/gpu-fpaintb.sh [PYTEST_K]   (PYTEST_K: a -k expression, bf16xint4 or fp16xint8)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/fpaintb"
rm -rf /tmp/tcfpaintb
export TILECONFORM_CACHE_DIR=/tmp/tcfpaintb
. "$(dirname "$0")/gpu-env.sh"
# the dense backend's entry point: the checkout is on PYTHONPATH, not installed
plugins+=(-p pytest_tileconform.flashinfer_dense.plugin)
MATRIX=matrices/gemm-sm90-fpaintb.yaml
nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
# leave the device call (600 s) time to pack what it has if the compile runs long
timeout "${LIMIT_S:-540}" python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix "$MATRIX" \
  --tile-device hardware --tile-build-jobs "$(nproc)" --tile-update ${1:+-k "$1"} \
  --tile-report "$OUT/fpaintb/report.json" > "$OUT/fpaintb/run.log" 2>&1
echo "rc=$? $(( $(date +%s) - start )) s"
tail -5 "$OUT/fpaintb/run.log"
python3 - "$OUT/fpaintb/report.json" <<'EOF' | tee "$OUT/fpaintb/summary.txt"
import collections, json, sys
try:
    cases = json.load(open(sys.argv[1]))["cases"]
except (OSError, ValueError) as exc:
    sys.exit(f"no report: {exc}")
by = collections.Counter((c["outcome"], (c.get("verdict") or {}).get("failed_stage")) for c in cases)
print(len(cases), "cases:", dict(by))
for c in cases:
    v = c.get("verdict") or {}
    if v.get("failed_stage"):
        print(c["id"], v["failed_stage"], v.get("status", ""), str(v.get("detail", ""))[:300])
EOF
cp "$MATRIX" "$OUT/fpaintb/"
tar -czf "$OUT/fpaintb.tar.gz" -C "$OUT" fpaintb && rm -rf "$OUT/fpaintb"
