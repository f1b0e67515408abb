#!/usr/bin/env bash
# Judge a whole matrix on the virtual device of each case's arch, on a host with many cores
# (any arch: an H200 host builds SM100/SM120 code as well as SM90), and record the
# expectations with --tile-update. Parallel compiles are bounded by cores and RAM.
#
#   scripts/gpu-virtual-record.sh MATRIX NAME [K-EXPRESSION]
#
# With K-EXPRESSION only the cases `-k` selects run (a large matrix in slices, one call each;
# --tile-update writes only what the slice judged).
# Everything goes to $OUT/NAME.tgz (default ./gpu-out).
set -uo pipefail
matrix=$1 name=$2 select=${3:-}
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
pack() { tar -czf "$out/$name.tgz" -C "$work" .; }
. "$(dirname "$0")/gpu-env.sh"
echo "cpus $(nproc), $(nvcc --version | tail -1)" > "$work/$name-device.txt"
start=$(date +%s)
python3 -m pytest "${plugins[@]}" -q -n 8 --tile-matrix "$matrix" --tile-device virtual --tile-update \
  ${select:+-k "$select"} --tile-report "$work/$name-virtual.json" > "$work/$name-virtual.log" 2>&1
echo "virtual cold: exit $? in $(( $(date +%s) - start )) s" | tee -a "$work/$name-times.txt"
cp "$matrix" "$work/$(basename "$matrix")"; pack
tail -4 "$work/$name-virtual.log"
