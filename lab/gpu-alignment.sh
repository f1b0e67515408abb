#!/usr/bin/env bash
# Record the separated alignment cases of matrices/sm90-failures.yaml (issue 32: the suites
# align-pitch and align-finalize) on an H200: judged on hardware with --tile-update, then on the
# virtual sm90 device from the same builds together with the numerics suites' cases (the rule
# epilogue-vector-row-alignment predicts those), and the two compared case by case.
#
# The checkout carries what lab/gpu-env.sh needs (.whl/ and .carry/).
#
#   [JOBS=$(nproc)] [TIMEOUT=60] [HARDWARE_LIMIT=300] [VIRTUAL_LIMIT=240] [NUMERICS=1] lab/gpu-alignment.sh
#
# NUMERICS=0 judges only the align-* cases on the virtual device too (no numerics suites' units
# to compile).
# Each session is interrupted with SIGINT at its limit, so its report is still written.
# Everything goes to $OUT (default ./gpu-out): alignment.yaml (the matrix as the hardware
# update left it), alignment-{hardware,virtual}.json.gz and .log (--tile-report),
# alignment-fidelity.txt (tileconform report compare), alignment-times.txt (device line, times).
set -uo pipefail
matrix=matrices/sm90-failures.yaml
jobs=${JOBS:-$(nproc)} timeout=${TIMEOUT:-60}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
. "$(dirname "$0")/gpu-env.sh"
# the align-* suites' problems (their names are the matrix's; none is another suite's)
new="k100e or k100x1 or n100e or n100x1 or k40e or k40x1 or n50e or n50x1 or k50e or n101t or n101x1 or n100t1 or n104"
P=(python3 -m pytest "${plugins[@]}" -q -rA -p no:xdist --tile-matrix "$matrix" --tile-build-jobs "$jobs"
   --tile-build-group 1 --tile-timeout "$timeout")
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  nvcc --version | tail -1
  echo "cpus $(nproc), build jobs $jobs, timeout $timeout s"; } > "$out/alignment-times.txt"
step() {  # NAME LIMIT ARGS...
  local name=$1 limit=$2 s; shift 2; s=$(date +%s)
  timeout -s INT -k 20 "$limit" "${P[@]}" "$@" --tile-report "$out/alignment-$name.json" \
    > "$out/alignment-$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - s )) s" | tee -a "$out/alignment-times.txt"
  tail -3 "$out/alignment-$name.log"
}
step hardware "${HARDWARE_LIMIT:-300}" -k "$new" --tile-device hardware --tile-update
cp "$matrix" "$out/alignment.yaml"
virtual=$new; [ "${NUMERICS:-1}" = 0 ] || virtual="$new or n101 or n100"
step virtual "${VIRTUAL_LIMIT:-240}" -k "$virtual" --tile-device virtual
python3 -m pytest_tileconform report compare "$out/alignment-hardware.json" "$out/alignment-virtual.json" \
  > "$out/alignment-fidelity.txt" 2>&1
echo "report compare: exit $?" | tee -a "$out/alignment-times.txt"
tail -5 "$out/alignment-fidelity.txt"
gzip -f "$out"/alignment-*.json
