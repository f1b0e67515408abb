#!/usr/bin/env bash
# Judge one SM90 matrix against several FlashInfer releases on the GPU host, one pytest process per
# release side by side (each with its share of the cores), first on the hardware, then on the
# virtual device from the same builds. The host has no package index: the releases come as
# cache entries (CACHE/flashinfer-releases/..., as --tile-flashinfer unpacks them on a machine
# that has one, wheel sha256 and version index included), so --tile-flashinfer VERSION finds each
# without pip and verdicts name the wheel's hash.
#
#   [JOBS=J] [BUILD_LIMIT=S] lab/gpu-releases.sh MATRIX ENTRIES.tar.xz WHEELS-DIR VERSION...
#
# ENTRIES.tar.xz: a tar of CACHE/flashinfer-releases/{versions/V.json, ab/<sha256>} for each
# VERSION; WHEELS-DIR: the plugin's own needs as wheels (ruamel.yaml, pydantic, ...). JOBS:
# --tile-build-jobs of each process (default 16 / the number of releases). BUILD_LIMIT:
# --tile-build-limit of the hardware runs (cases not built by then are skipped, saying so).
# DEVICE: the first run's --tile-device (default hardware; virtual to rehearse on a CPU machine),
# TILECONFORM_CACHE_DIR: the build cache (default /tmp/tc-releases).
# Into $OUT: releases.tar.gz (sm90-V-{hardware,virtual}.{json,log} for each V) and times.txt.
set -uo pipefail
matrix=$1 entries=$2 wheels=$3
shift 3
out=${OUT:-$PWD/gpu-out}
work=${WORK:-$(mktemp -d)}  # WORK: keep the reports and logs there too (to save them from a timeout)
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pycache
unset PYTHONDONTWRITEBYTECODE
export TILECONFORM_CACHE_DIR=${TILECONFORM_CACHE_DIR:-/tmp/tc-releases}
mkdir -p "$TILECONFORM_CACHE_DIR/flashinfer-releases"
tar -xJf "$entries" -C "$TILECONFORM_CACHE_DIR/flashinfer-releases" || exit 1
# --noconftest: run from the checkout, pytest would load tests/conftest.py (testpaths), which points
# TILECONFORM_CACHE_DIR at the suite's own cache: the carried releases would not be found there
plugins=(-p pytest_tileconform.plugin -p pytest_tileconform.flashinfer.plugin -p no:cacheprovider --noconftest)
jobs=${JOBS:-$(( $(nproc) / $# ))}
judge() {
  local version=$1 start
  start=$(date +%s)
  python3 -m pytest "${plugins[@]}" -q -rs --tile-matrix "$matrix" --tile-flashinfer "$version" \
    --tile-device "${DEVICE:-hardware}" --tile-build-jobs "$jobs" ${BUILD_LIMIT:+--tile-build-limit "$BUILD_LIMIT"} \
    --tile-report "$work/sm90-$version-hardware.json" > "$work/sm90-$version-hardware.log" 2>&1
  echo "$version ${DEVICE:-hardware}: exit $? in $(( $(date +%s) - start )) s" >> "$work/times.txt"
  start=$(date +%s)
  # the same builds: nothing more is compiled (a case the hardware run did not build is skipped)
  python3 -m pytest "${plugins[@]}" -q -rs --tile-matrix "$matrix" --tile-flashinfer "$version" \
    --tile-device virtual --tile-build-limit 1 \
    --tile-report "$work/sm90-$version-virtual.json" > "$work/sm90-$version-virtual.log" 2>&1
  echo "$version virtual: exit $? in $(( $(date +%s) - start )) s" >> "$work/times.txt"
}
for version in "$@"; do judge "$version" & done
wait
cp "$work/times.txt" "$out/times.txt"
tar -czf "$out/releases.tar.gz" -C "$work" .
cat "$work/times.txt"
for version in "$@"; do echo "== $version"; tail -4 "$work/sm90-$version-hardware.log"; done
