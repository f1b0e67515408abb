#!/usr/bin/env bash
# Judge a matrix slice on a GPU host that has no package index, record the expectations with
# the plugin's update flow and compare hardware with the virtual device on the same builds.
#
# The checkout carries what scripts/gpu-env.sh needs (.whl/ and .carry/).
#
#   [WORKERS=4] [JOBS=$(nproc)] scripts/gpu-record.sh MATRIX KEYWORD NAME
#
# WORKERS: pytest-xdist workers of the hardware runs (spread over the GPUs); JOBS: parallel
# compiles for the host. The warm rerun also times 20 launcher calls per case (kernel_ms).
# Everything goes to $OUT/NAME.tgz (default ./gpu-out), re-packed after every step so a run
# cut short still brings back what it did.
set -uo pipefail
matrix=$1 keyword=$2 name=$3
workers=${WORKERS:-4} jobs=${JOBS:-$(nproc)}
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
pack() { tar -czf "$out/$name.tgz" -C "$work" .; }
. "$(dirname "$0")/gpu-env.sh"
pytest=(python3 -m pytest "${plugins[@]}" -q --tile-matrix "$matrix" -k "$keyword")
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > "$work/$name-device.txt"
nvcc --version | tail -1 >> "$work/$name-device.txt"
echo "cpus $(nproc), workers $workers, build jobs $jobs" >> "$work/$name-device.txt"

start=$(date +%s)
"${pytest[@]}" -n "$workers" --tile-device hardware --tile-build-jobs "$jobs" --tile-update \
  --tile-report "$work/$name-hardware.json" > "$work/$name-hardware.log" 2>&1
echo "hardware cold: exit $? in $(( $(date +%s) - start )) s" | tee -a "$work/$name-times.txt"; pack
cp "$matrix" "$work/$(basename "$matrix")"; pack

start=$(date +%s)
"${pytest[@]}" -n 8 --tile-device virtual --tile-report "$work/$name-virtual.json" \
  > "$work/$name-virtual.log" 2>&1
echo "virtual (warm builds): exit $? in $(( $(date +%s) - start )) s" | tee -a "$work/$name-times.txt"; pack

start=$(date +%s)
"${pytest[@]}" -n "$workers" --tile-device hardware --tile-timing-iters 20 \
  --tile-report "$work/$name-hardware-warm.json" \
  > "$work/$name-hardware-warm.log" 2>&1
echo "hardware warm: exit $? in $(( $(date +%s) - start )) s" | tee -a "$work/$name-times.txt"; pack

python3 -m pytest_tileconform report compare "$work/$name-hardware.json" "$work/$name-virtual.json" \
  > "$work/$name-fidelity.txt" 2>&1
pack; tail -1 "$work/$name-fidelity.txt"
tail -3 "$work/$name-hardware.log"
