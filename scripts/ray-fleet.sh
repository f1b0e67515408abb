#!/usr/bin/env bash
# A CPU build farm simulated on one host: a Ray cluster of two nodes (`ray start --head` and a
# worker node, CORES_PER_NODE each, their own local build caches) compiles a slice of a matrix into
# a file:// remote tier (--tile-build-on), then a second pytest with an empty local cache judges
# the same slice from the remote tier. Prints each step's wall time; the cluster's processes (found
# by a mark in their environment) are killed at the end, by process id.
#
#   scripts/ray-fleet.sh MATRIX K_EXPRESSION [pytest options...]
#   e.g. flock /work/compile.lock scripts/ray-fleet.sh matrices/smoke-sm90.yaml \
#          "128x128x64 or 256x128x64" --tile-device virtual --tile-build-group 1 --tile-build-jobs 1
#
# WORK (default /tmp/tc-fleet) holds the caches, the remote tier and Ray's session (short: its
# sockets' paths are limited); PYTHON (default .venv/bin/python) has the plugin with the remote and
# ray extras.
set -euo pipefail
matrix=$1
select=$2
shift 2
work=${WORK:-/tmp/tc-fleet}
python=${PYTHON:-.venv/bin/python}
cores=${CORES_PER_NODE:-1}
ray_cli="$(dirname "$python")/ray"
mark="tc-fleet-$$"
rm -rf "$work"
mkdir -p "$work"
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
gcs=$(free_port)
client=$(free_port)

stop() {
  for dir in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$dir/environ"; } 2>/dev/null | grep -qx "TC_FLEET_MARK=$mark"; then
      kill -9 "${dir#/proc/}" 2>/dev/null || true
    fi
  done
}
trap stop EXIT

export RAY_USAGE_STATS_ENABLED=0
start=$(date +%s.%N)
TC_FLEET_MARK=$mark TILECONFORM_CACHE_DIR="$work/node0" "$ray_cli" start --head --port "$gcs" \
  --ray-client-server-port "$client" --include-dashboard=false --temp-dir "$work/ray" --num-cpus "$cores" \
  --node-ip-address 127.0.0.1 --object-store-memory 80000000 > "$work/head.log" 2>&1
TC_FLEET_MARK=$mark TILECONFORM_CACHE_DIR="$work/node1" "$ray_cli" start --address "127.0.0.1:$gcs" \
  --num-cpus "$cores" --node-ip-address 127.0.0.1 --object-store-memory 80000000 > "$work/worker.log" 2>&1
echo "cluster of 2 nodes x $cores core(s) started in $(echo "$(date +%s.%N) - $start" | bc) s"

remote="file://$work/remote"
run() {
  local name=$1
  shift
  local t0
  t0=$(date +%s.%N)
  "$python" -m pytest --tile-matrix "$matrix" -k "$select" -p no:cacheprovider -rs \
    --tile-cache-remote "$remote" --tile-report "$work/$name.json" "$@" > "$work/$name.log" 2>&1 || true
  echo "$name: $(echo "$(date +%s.%N) - $t0" | bc) s; $(tail -n 1 "$work/$name.log")"
}
run farm --tile-cache-dir "$work/driver" --tile-build-on "ray://127.0.0.1:$client" "$@"
grep -E "build farm|compiled on the farm" "$work/farm.log" || true
run judge --tile-cache-dir "$work/judge" "$@"
echo "compiles in the judging run: $(grep -c 'compiling\|compiled on' "$work/judge.log" || true)"
echo "units in the remote tier: $(find "$work/remote/entries" -name '*.json' | wc -l) entries, $(find "$work/remote/blobs" -type f | wc -l) blobs, $(du -sh "$work/remote" | cut -f1)"
