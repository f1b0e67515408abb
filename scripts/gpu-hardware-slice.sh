#!/usr/bin/env bash
# Judge one slice of a matrix on the GPU host's hardware and record it with --tile-update, in one
# pytest process (one worker: one planner for all the slice's compiles). For matrices too large
# for one call (SM90's mixed-input kernels: about 7 s of the 16-core host each), a slice per call.
#
#   [GROUP=G] [WORKERS=1] [BUILD_LIMIT=B] [LIMIT=S] scripts/gpu-hardware-slice.sh MATRIX K-EXPRESSION|@FILE NAME
#
# GROUP: --tile-build-group (most instantiations per unit). BUILD_LIMIT: --tile-build-limit,
# stop compiling after B seconds and judge the cases built by then (the others are skipped; what
# was compiled stays cached); with LIMIT it defaults to LIMIT - 90, which leaves the judging about
# a second per case for a slice of 80 (scripts/unjudged-slice.py --round 16:5). LIMIT: interrupt
# pytest after S seconds (SIGINT), a backstop for the call's own limit: the session still ends, so
# the verdicts it has are written to the report and the matrix, and the units already compiled
# stay in the cache for the next call of the same slice. @FILE: the -k expression is FILE's text
# (lists of case ids pass the device's 2,000-character command limit this way). Into $OUT:
# NAME-hardware.json.gz, NAME-hardware.log, NAME-times.txt and the matrix as the update left it
# (NAME-matrix.yaml).
set -uo pipefail
matrix=$1 select=$2 name=$3 workers=${WORKERS:-1}
case $select in @*) select=$(cat "${select#@}") || exit 2 ;; esac
limit=()
build_limit=${BUILD_LIMIT:-}
if [ -n "${LIMIT:-}" ]; then
  limit=(timeout -s INT -k 30 "$LIMIT")
  [ -z "$build_limit" ] && [ "$LIMIT" -gt 180 ] && build_limit=$(( LIMIT - 90 ))
fi
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$(dirname "$0")/gpu-env.sh"
start=$(date +%s)
"${limit[@]}" python3 -m pytest "${plugins[@]}" -q -n "$workers" --tile-matrix "$matrix" -k "$select" \
  --tile-device hardware --tile-build-jobs "$(nproc)" ${GROUP:+--tile-build-group "$GROUP"} \
  ${build_limit:+--tile-build-limit "$build_limit"} \
  --tile-update --tile-report "$out/$name-hardware.json" > "$out/$name-hardware.log" 2>&1
echo "hardware cold: exit $? in $(( $(date +%s) - start )) s" | tee "$out/$name-times.txt"
cp "$matrix" "$out/$name-matrix.yaml"
gzip -f "$out/$name-hardware.json"
tail -12 "$out/$name-hardware.log"
