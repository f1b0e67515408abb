#!/usr/bin/env bash
# Judge matrices on the virtual device twice, with an earlier copy of the package and with this
# checkout, on one build cache, and compare the two reports case by case
# (`tileconform report compare`). A reshaping that changes no build finds every unit of the
# second run in the cache the first one filled.
#
#   [STEPS="before after compare"] lab/gpu-virtual-compare.sh OLD_PACKAGE_PARENT NAME MATRIX...
#
# STEPS runs a part (a host that limits each command's time: one step a command, on the same
# host, so the cache stays). Reports of several calls are compared once all are there.
# OLD_PACKAGE_PARENT holds the earlier pytest_tileconform/ (e.g. from `git archive REV
# pytest_tileconform | tar -x -C DIR`). Reports and logs are kept in /tmp/gpu-compare/NAME (for
# the steps of later commands) and packed into $OUT/NAME.tgz (default ./gpu-out).
set -uo pipefail
old=$(cd "$1" && pwd) name=$2; shift 2
out=/tmp/gpu-compare/$name
mkdir -p "$out" "${OUT:=$PWD/gpu-out}"
. "$(dirname "$0")/gpu-env.sh"
here=$PYTHONPATH root=$PWD
matrices=()
for m in "$@"; do matrices+=(--tile-matrix "$(cd "$(dirname "$m")" && pwd)/$(basename "$m")"); done
echo "cpus $(nproc), $(nvcc --version | tail -1)" | tee "$out/$name-device.txt"
judge() {  # judge LABEL PYTHONPATH: from an empty folder, so that `python -m` puts no package
  # of the checkout on the path ahead of PYTHONPATH's
  local start; start=$(date +%s)
  mkdir -p "/tmp/judge-$1"
  (cd "/tmp/judge-$1" && PYTHONPATH=$2 python3 -m pytest "${plugins[@]}" -q -n 8 "${matrices[@]}" \
    --rootdir "$root" --noconftest --tile-device virtual --tile-report "$out/$name-$1.json") \
    > "$out/$name-$1.log" 2>&1
  echo "$1: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/$name-times.txt"
  tail -3 "$out/$name-$1.log"
}
for step in ${STEPS:-before after compare}; do
  case $step in
    before) judge before "/tmp/site:$old" ;;
    after) judge after "$here" ;;
    compare) python3 -m pytest_tileconform report compare "$out/$name-before.json" \
      "$out/$name-after.json" | tee "$out/$name-compare.txt" ;;
  esac
  tar -czf "$OUT/$name.tgz" -C "$out" .
done
