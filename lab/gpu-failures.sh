#!/usr/bin/env bash
# Record matrices/sm90-failures.yaml on an H200 (issue 18): judge every case on the GPU with
# --tile-update, which writes the stage of each failing case into the matrix's expectations,
# then judge the same builds on the virtual sm90 device and compare the two case by case.
#
# The checkout carries what lab/gpu-env.sh needs (.whl/ and .carry/).
#
#   [JOBS=$(nproc)] [TIMEOUT=60] [KEYWORD=EXPR] lab/gpu-failures.sh
#
# Each case is compiled in a unit of its own (--tile-build-group 1): 18 cases fail to compile,
# and a shared unit that fails is compiled again in halves. KEYWORD (pytest -k) judges a slice,
# for a host where one call cannot take the whole matrix: KEYWORD='not finalize', then
# KEYWORD=finalize, with the first call's $OUT/sm90-failures.yaml copied over the matrix before
# the second (each update writes only the cases it judged) and each call its own OUT.
#
# Everything goes to $OUT (default ./gpu-out): sm90-failures.yaml (the matrix as the update left
# it), sm90-failures-hardware.json and -virtual.json (--tile-report), the two pytest logs,
# sm90-failures-fidelity.txt (tileconform report compare), the device line and the times.
set -uo pipefail
matrix=matrices/sm90-failures.yaml
jobs=${JOBS:-$(nproc)} timeout=${TIMEOUT:-60}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$(dirname "$0")/gpu-env.sh"
pytest=(python3 -m pytest "${plugins[@]}" -q -rA --tile-matrix "$matrix" --tile-build-jobs "$jobs"
  --tile-build-group 1 --tile-timeout "$timeout")
if [ -n "${KEYWORD:-}" ]; then pytest+=(-k "$KEYWORD"); fi
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  nvcc --version | tail -1
  echo "cpus $(nproc), build jobs $jobs, timeout $timeout s"; } > "$out/sm90-failures-device.txt"

start=$(date +%s)
"${pytest[@]}" --tile-device hardware --tile-update --tile-report "$out/sm90-failures-hardware.json" \
  > "$out/sm90-failures-hardware.log" 2>&1
echo "hardware with --tile-update: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/sm90-failures-times.txt"
cp "$matrix" "$out/sm90-failures.yaml"

start=$(date +%s)
"${pytest[@]}" --tile-device virtual --tile-report "$out/sm90-failures-virtual.json" \
  > "$out/sm90-failures-virtual.log" 2>&1
echo "virtual (the same builds): exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/sm90-failures-times.txt"

python3 -m pytest_tileconform report compare "$out/sm90-failures-hardware.json" \
  "$out/sm90-failures-virtual.json" > "$out/sm90-failures-fidelity.txt" 2>&1
echo "report compare: exit $?" | tee -a "$out/sm90-failures-times.txt"
tail -3 "$out/sm90-failures-hardware.log"
tail -5 "$out/sm90-failures-fidelity.txt"
