#!/usr/bin/env bash
# Where the first verdict of one SM90 case goes when its build is cached: builds it once, then
# times the plugin twice, writes -X importtime and a cProfile of a third run to $OUT, and times
# nvidia-smi, torch, pytest and python alone.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
export TILECONFORM_CACHE_DIR=/tmp/tcprof
. "$(dirname "$0")/gpu-env.sh"
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix matrices/smoke-sm90.yaml --tile-device hardware -k bf16-128x128x64-c1x1x1-none)
"${P[@]}" > "$OUT/cold.log" 2>&1; tail -1 "$OUT/cold.log"
for _ in 1 2; do s=$(date +%s%N); "${P[@]}" > /dev/null 2>&1; echo "plain $(( ($(date +%s%N)-s)/1000000 )) ms"; done
python3 -X importtime "${P[@]:1}" > /dev/null 2> "$OUT/importtime.txt"
python3 -m cProfile -o "$OUT/first.prof" "${P[@]:1}" > /dev/null 2>&1
s=$(date +%s%N); nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader; echo "smi $(( ($(date +%s%N)-s)/1000000 )) ms"
s=$(date +%s%N); python3 -c "import torch"; echo "torch $(( ($(date +%s%N)-s)/1000000 )) ms"
s=$(date +%s%N); python3 -c "import pytest"; echo "pytest $(( ($(date +%s%N)-s)/1000000 )) ms"
s=$(date +%s%N); python3 -c "pass"; echo "python $(( ($(date +%s%N)-s)/1000000 )) ms"
nvidia-smi -q | grep -i "persistence"
