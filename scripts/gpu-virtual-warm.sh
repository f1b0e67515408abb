#!/usr/bin/env bash
# Time a matrix (or a -k slice of it) on the virtual device on a many-core host, cold from an
# empty cache and then warm, the same command again with the builds cached: the host loses its
# cache when idle, so both runs share one call. No --tile-update: the verdicts are compared with
# the recorded ones, not written.
#
#   scripts/gpu-virtual-warm.sh MATRIX NAME [K-EXPRESSION]
#
# Into $OUT (default ./gpu-out): NAME-{cold,warm}.json.gz, NAME-{cold,warm}.log; each run's
# wall time is printed ("NAME-cold: exit 0 in 223 s").
set -uo pipefail
matrix=$1 name=$2 select=${3:-}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$(dirname "$0")/gpu-env.sh"
for run in cold warm; do
  start=$(date +%s)
  python3 -m pytest "${plugins[@]}" -q -n 8 --tile-matrix "$matrix" --tile-device virtual \
    ${select:+-k "$select"} --tile-report "$out/$name-$run.json" > "$out/$name-$run.log" 2>&1
  echo "$name-$run: exit $? in $(( $(date +%s) - start )) s"
  tail -1 "$out/$name-$run.log"
  gzip -f "$out/$name-$run.json"
done
