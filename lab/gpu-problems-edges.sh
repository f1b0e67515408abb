#!/usr/bin/env bash
# The `edges` problem of matrices/sm90-problems.yaml (a proposal) on an H200, PDL off (what the
# harness launches today), for all 360 SM90 tile configurations: does every tile and dtype take
# partial K tiles (k 1008), partial N tiles (n 1000), empty experts first/middle/last, and several
# waves of tiles per SM? No --tile-update: this is a probe of the proposal, not a recording.
# Its inputs are small (41 M elements), so today's CPU inputs do (about 0.4 s a case).
#
#   [JOBS=$(nproc)] [TIMEOUT=60] lab/gpu-problems-edges.sh
#
# Everything goes to $OUT (default ./gpu-out): problems-edges.log (pytest -rA: each case's
# verdict), problems-edges.json (--tile-report; needs results/model.py to accept the case fields
# pdl, tokens and top_k), the device line and the time.
set -uo pipefail
jobs=${JOBS:-$(nproc)} timeout=${TIMEOUT:-60}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$(dirname "$0")/gpu-env.sh"
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  echo "cpus $(nproc), build jobs $jobs, timeout $timeout s"; } > "$out/problems-edges-device.txt"
start=$(date +%s)
python3 -m pytest "${plugins[@]}" -q -rA --tile-matrix matrices/sm90-problems.yaml \
  -k "edges and nopdl" --tile-device hardware --tile-build-jobs "$jobs" --tile-timeout "$timeout" \
  --tile-report "$out/problems-edges.json" > "$out/problems-edges.log" 2>&1
echo "exit $? in $(( $(date +%s) - start )) s" | tee "$out/problems-edges-time.txt"
tail -15 "$out/problems-edges.log"
