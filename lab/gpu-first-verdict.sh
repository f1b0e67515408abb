#!/usr/bin/env bash
# The cold first verdict of one SM90 case, RUNS times on this host, each from a new empty build
# cache, every line of the pytest process timestamped from its start (when the compile begins,
# when it ends, when the verdict is written). Reports and logs in $OUT.
#
#   RUNS=3 [TAG=name] lab/gpu-first-verdict.sh   (TAG prefixes the file names: two checkouts, one $OUT)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu-env.sh"
for i in $(seq "${RUNS:-3}"); do
  export TILECONFORM_CACHE_DIR=/tmp/tcfirst${TAG:-}$i; rm -rf "$TILECONFORM_CACHE_DIR"
  python3 -u - python3 -m pytest -q -p no:cacheprovider "${plugins[@]}" -p no:xdist \
    --tile-matrix matrices/smoke-sm90.yaml --tile-device hardware -k bf16-128x128x64 \
    --tile-report "$OUT/${TAG:-}cold$i.json" > "$OUT/${TAG:-}stamped$i.txt" 2>&1 <<'PY'
import subprocess, sys, time
start = time.time()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in proc.stdout:
    print(f"{time.time() - start:7.2f} {line.rstrip()}", flush=True)
sys.exit(proc.wait())
PY
  echo "${TAG:-} run $i"; grep -E "compiling 1|elapsed\)|passed|failed" "$OUT/${TAG:-}stamped$i.txt"
done
