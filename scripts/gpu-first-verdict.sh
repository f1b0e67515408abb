#!/usr/bin/env bash
# Time to the first verdict for one SM90 case from an empty build cache, on hardware, then
# FlashInfer's own route on the same host in the same call (a sample of its fused_moe_90
# module's generated files compiled with its flags, see benchmarks/flashinfer_route.py;
# prepared into .bench/fi-route where flashinfer-python is installed). In between, the same
# case again from the filled cache, in a new process from a copy of the filled cache at another
# path (what a runner gets from a cache another machine filled). Python's bytecode cache is
# filled first (as any installed Python has it), so no run pays for compiling torch's sources.
# The route runs after this project's runs, not beside them: run at the same time it held 12 of
# the 16 cores and the cold verdict took 64.6 s instead of 53.4 s (BENCHMARKS.md).
#
#   [ROUTE=0] [ROUTE_SAMPLE=DIR] scripts/gpu-first-verdict.sh NAME
#   (ROUTE=0: leave FlashInfer's route out; ROUTE_SAMPLE: the prepared sample, default .bench/fi-route)
set -uo pipefail
name=$1
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
export TILECONFORM_CACHE_DIR=/tmp/tc-first-verdict
rm -rf "$TILECONFORM_CACHE_DIR" "$TILECONFORM_CACHE_DIR-elsewhere"
. "$(dirname "$0")/gpu-env.sh"
echo "cpus $(nproc), $(nvcc --version | tail -1)" > "$work/$name-device.txt"
python3 -c "import torch, pytest, pydantic, ruamel.yaml, pytest_tileconform.plugin"  # bytecode
one=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix matrices/smoke-sm90.yaml
     -k "bf16-128x128x64" --tile-device hardware)
# own-plugins: the same without the host's other pytest plugins (this host auto-loads
# hypothesis and jaxtyping through their entry points; pytest-xdist is not needed for one case)
for run in cold warm warm-again own-plugins; do
  start=$(date +%s%N)
  if [ "$run" = own-plugins ]; then
    PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "${one[@]}" --tile-report "$work/$name-$run.json" > "$work/$name-$run.log" 2>&1
  else
    "${one[@]}" --tile-report "$work/$name-$run.json" > "$work/$name-$run.log" 2>&1
  fi
  echo "$run: exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$work/$name-times.txt"
  if [ "$run" = cold ]; then  # the cache as another machine would hand it over: another path
    cp -a "$TILECONFORM_CACHE_DIR" "$TILECONFORM_CACHE_DIR-elsewhere"
    export TILECONFORM_CACHE_DIR=$TILECONFORM_CACHE_DIR-elsewhere
  fi
done
# where the filled-cache run goes: a cProfile and -X importtime of it, and its parts alone
python3 -m cProfile -o "$work/$name-warm.prof" "${one[@]:1}" > /dev/null 2>&1
python3 -X importtime "${one[@]:1}" > /dev/null 2> "$work/$name-importtime.txt"
for part in "nvidia-smi --query-gpu=name,compute_cap,uuid --format=csv,noheader" "python3 -c pass" \
    "python3 -c 'import torch'" "python3 -c 'import pytest'"; do
  start=$(date +%s%N); eval "$part" > /dev/null 2>&1
  echo "alone: $part in $(( ($(date +%s%N) - start) / 1000000 )) ms" >> "$work/$name-times.txt"
done
tar -czf "$out/$name.tgz" -C "$work" .
if [ "${ROUTE:-1}" != 0 ]; then
  python3 benchmarks/flashinfer_route.py compile "${ROUTE_SAMPLE:-.bench/fi-route}" --sources /tmp/fi/data \
    > "$work/$name-flashinfer-route.json" 2> "$work/$name-flashinfer-route.log"
  tar -czf "$out/$name.tgz" -C "$work" .
  cat "$work/$name-flashinfer-route.json"
fi
