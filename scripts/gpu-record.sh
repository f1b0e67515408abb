#!/usr/bin/env bash
# Judge a matrix slice on a GPU host that has no package index, record the expectations with
# the plugin's update flow and compare hardware with the virtual device on the same builds.
#
# The checkout carries .whl/ (ruamel.yaml, pydantic and their needs, as wheels) and
# .carry/flashinfer-data.tar.xz (FlashInfer's kernel sources: data/{csrc/nv_internal,
# cutlass, cccl, spdlog, include} and a VERSION file).
#
#   scripts/gpu-record.sh MATRIX KEYWORD NAME     (writes into $OUT, default ./gpu-out)
set -uo pipefail
matrix=$1 keyword=$2 name=$3
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ ! -d /tmp/fi/data ]; then mkdir -p /tmp/fi && tar -xJf .carry/flashinfer-data.tar.xz -C /tmp/fi; fi
export TILECONFORM_FLASHINFER_SOURCES=/tmp/fi/data TILECONFORM_CACHE_DIR=/tmp/tccache
pytest=(python3 -m pytest -p pytest_tileconform.plugin -p pytest_tileconform.flashinfer.plugin
        -p no:cacheprovider -q --tile-matrix "$matrix" -k "$keyword")
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader > "$out/$name-device.txt"
nvcc --version | tail -1 >> "$out/$name-device.txt"

start=$(date +%s)
"${pytest[@]}" -n 4 --tile-device hardware --tile-build-jobs 16 --tile-update \
  --tile-report "$out/$name-hardware.json" > "$out/$name-hardware.log" 2>&1
echo "hardware cold: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/$name-times.txt"
cp "$matrix" "$out/$(basename "$matrix")"

start=$(date +%s)
"${pytest[@]}" -n 8 --tile-device virtual --tile-report "$out/$name-virtual.json" \
  > "$out/$name-virtual.log" 2>&1
echo "virtual (warm builds): exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/$name-times.txt"

start=$(date +%s)
"${pytest[@]}" -n 4 --tile-device hardware --tile-report "$out/$name-hardware-warm.json" \
  > "$out/$name-hardware-warm.log" 2>&1
echo "hardware warm: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/$name-times.txt"

python3 -m pytest_tileconform.fidelity "$out/$name-hardware.json" "$out/$name-virtual.json" \
  > "$out/$name-fidelity.txt" 2>&1
tail -1 "$out/$name-fidelity.txt"
tail -3 "$out/$name-hardware.log"
