#!/usr/bin/env bash
# A CPU build farm simulated on one host: a Ray cluster of NODES nodes (default 2: `ray start
# --head` and worker nodes, CORES_PER_NODE cores and MEMORY_PER_NODE bytes each, since every node
# would otherwise claim most of the host's memory; their own local build caches) compiles a slice of a matrix into
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
# ray extras; RAY (default: the `ray` beside PYTHON) is Ray's command line.
set -euo pipefail
matrix=$1
select=$2
shift 2
work=${WORK:-/tmp/tc-fleet}
python=${PYTHON:-.venv/bin/python}
cores=${CORES_PER_NODE:-1}
nodes=${NODES:-2}
memory=${MEMORY_PER_NODE:-}
ray_cli=${RAY:-"$(dirname "$python")/ray"}
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
start=$(date +%s%N)
since() { echo "$((($(date +%s%N) - $1) / 1000000)) ms"; }
TC_FLEET_MARK=$mark TILECONFORM_CACHE_DIR="$work/node0" "$ray_cli" start --head --port "$gcs" \
  --ray-client-server-port "$client" --include-dashboard=false --temp-dir "$work/ray" --num-cpus "$cores" \
  ${memory:+--memory "$memory"} --node-ip-address 127.0.0.1 --object-store-memory 80000000 > "$work/head.log" 2>&1
for ((node = 1; node < nodes; node++)); do
  TC_FLEET_MARK=$mark TILECONFORM_CACHE_DIR="$work/node$node" "$ray_cli" start --address "127.0.0.1:$gcs" \
    --num-cpus "$cores" ${memory:+--memory "$memory"} --node-ip-address 127.0.0.1 \
    --object-store-memory 80000000 > "$work/worker$node.log" 2>&1
done
echo "cluster of $nodes nodes x $cores core(s) started in $(since "$start")"

remote="file://$work/remote"
run() {
  local name=$1
  shift
  local t0
  t0=$(date +%s%N)
  # each line of the log starts with the second it was printed at (when each unit came back)
  { "$python" -m pytest --tile-matrix "$matrix" -k "$select" -p no:cacheprovider -rs \
    --tile-cache-remote "$remote" --tile-report "$work/$name.json" "$@" 2>&1 || true; } |
    while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N | cut -c1-14)" "$line"; done > "$work/$name.log"
  echo "$name: $(since "$t0"); $(tail -n 1 "$work/$name.log")"
}
run farm --tile-cache-dir "$work/driver" --tile-build-on "ray://127.0.0.1:$client" "$@"
grep -E "build farm|compiled on the farm" "$work/farm.log" || true
run judge --tile-cache-dir "$work/judge" "$@"
echo "compiles in the judging run: $(grep -c 'compiling\|compiled on' "$work/judge.log" || true)"
echo "units in the remote tier: $(find "$work/remote/entries" -name '*.json' | wc -l) entries, $(find "$work/remote/blobs" -type f | wc -l) blobs, $(du -sh "$work/remote" | cut -f1)"
