#!/usr/bin/env bash
# Issue 36's fleet on the H200 host: its 16 cores split into a Ray cluster of NODES nodes
# (default 4 x 4 cores, 30 GB each) build a shard of SM90's mixed-input space into a file://
# remote tier (scripts/ray-fleet.sh), then a second process with an empty local cache judges the
# same shard from the remote tier on the GPU, with no compile. Ray is not on the host and its
# wheel is over the carry limit: the checkout carries .carry/ray/ray.tar.xz (the wheel's files
# less its Java jar and dashboard source maps) and .carry/ray/whl/ (Ray's requirements, py3.12).
# Into $OUT: gpu-ray-fleet.txt (the steps' times) and gpu-ray-fleet.tgz (logs and reports).
#
#   [SHARD=1/24] [NODES=4] [CORES_PER_NODE=4] [MEMORY_PER_NODE=30000000000] [GROUP=5] \
#     lab/gpu-ray-fleet.sh [MATRIX]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
matrix=${1:-matrices/sm90-mixed-flashinfer.yaml}
. "$(dirname "$0")/gpu-env.sh"
summary=$OUT/gpu-ray-fleet.txt
s=$(date +%s%N)
if [ ! -d /tmp/raysite/ray ]; then
  mkdir -p /tmp/raysite && tar -xJf .carry/ray/ray.tar.xz -C /tmp/raysite &&
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/raysite .carry/ray/whl/*.whl
fi
export PYTHONPATH=/tmp/raysite:$PYTHONPATH
mkdir -p /tmp/raybin
printf '#!/bin/sh\nexec python3 -c "import sys; from ray.scripts.scripts import main; sys.argv[0] = \\"ray\\"; sys.exit(main())" "$@"\n' > /tmp/raybin/ray
chmod +x /tmp/raybin/ray
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; echo "cpus $(nproc)"
  echo "ray $(python3 -c 'import ray; print(ray.__version__)' 2>&1 | tail -1); provisioned in $((($(date +%s%N) - s) / 1000000)) ms"
  python3 benchmarks/farm_model.py "$matrix" --nodes "${NODES:-4}" --cores "${CORES_PER_NODE:-4}" \
    --memory-gb "$(( ${MEMORY_PER_NODE:-30000000000} / 1000000000 ))" --group "${GROUP:-5}" --shard "${SHARD:-1/24}"
} 2>&1 | tee "$summary"
WORK=/tmp/tcf PYTHON=python3 RAY=/tmp/raybin/ray NODES=${NODES:-4} CORES_PER_NODE=${CORES_PER_NODE:-4} \
  MEMORY_PER_NODE=${MEMORY_PER_NODE:-30000000000} scripts/ray-fleet.sh "$matrix" "" "${plugins[@]}" \
  -p no:xdist -q --tile-shard "${SHARD:-1/24}" --tile-build-group "${GROUP:-5}" --tile-device hardware 2>&1 | tee -a "$summary"
tar -czf "$OUT/gpu-ray-fleet.tgz" -C /tmp/tcf --exclude=ray --exclude='node*' --exclude=remote --exclude=driver --exclude=judge .
