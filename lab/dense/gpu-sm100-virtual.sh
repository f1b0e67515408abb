#!/usr/bin/env bash
# The SM100 dense GEMM matrices judged on the virtual sm100 with the GPU host's CPUs only
# (--tile-device virtual: no kernel runs, the GPU is not used): every tactic FlashInfer 0.7.4's
# autotuner offers for mm_fp4 (matrices/gemm-sm100-fp4.yaml) and mm_mxfp8
# (matrices/gemm-sm100-mxfp8.yaml), cold, in one pytest run so the units (one per output type and
# CTA tile: 8 a family, each holding the tile's eight cluster-shape tactics) compile JOBS at a
# time; --tile-update writes the matrices' expectations, --tile-report the report.
# Into $OUT: gpu-sm100-virtual.txt (host, times, the run's summary) and gpu-sm100-virtual.tgz
# (the report as .json.gz, the updated matrices, the run's log).
#
# Budget (< 9 min): 16 units of about 82-90 CPU-s and 5.2 GB each (measured on the 2-core CPU
# machine: one unit of each family, 164.5 CPU-s together, largest process 5.24 GB) over 16 cores
# and 128 GB is about one unit's wall time (2-4 min, with the runtime build) plus provisioning;
# BUDGET_S stops pytest with SIGINT (it still writes the report) so the tarball always comes back;
# FAMILIES drops a family. fp8 and bf16 (SM100's other runners: 12 and 15 units) have no harness
# yet and are not judged here.
#
# Carry (git-ignored, so named in the run's carry): .whl/ and .carry/flashinfer-data.tar.xz as
# every lab script (lab/gpu-env.sh), and .carry/flashinfer-dense.tar.xz: the installed FlashInfer's
# GEMM generator (jit/gemm/core.py) and its dense CUTLASS templates and bindings
# (data/csrc/*_gemm_cutlass*.{jinja,cu}), which the dense backend reads and the common tarball
# lacks. On the CPU machine, from the repository root, `bash lab/dense/gpu-sm100-virtual.sh --carry`
# makes all three from /work/main/.carry/common and the installed FlashInfer.
#
#   [FAMILIES="fp4 mxfp8"] [JOBS=16] [BUDGET_S=420] lab/dense/gpu-sm100-virtual.sh [--carry]
#
# Through the device tool, from a checkout where --carry has run (kind nvidia-h200; the GPU idles):
#   command: OUT=$OUT bash lab/dense/gpu-sm100-virtual.sh
#   carry:   [".carry/flashinfer-data.tar.xz", ".carry/flashinfer-dense.tar.xz", ".whl"]
set -uo pipefail
if [ "${1:-}" = --carry ]; then
  set -e
  mkdir -p .carry .whl
  cp /work/main/.carry/common/flashinfer-data.tar.xz .carry/
  cp /work/main/.carry/common/whl/*.whl .whl/
  py=${PYTHON:-$PWD/.venv/bin/python}  # asked from /tmp, where no checkout shadows the package
  fi_dir=$(cd /tmp && "$py" -c 'import flashinfer, os; print(os.path.dirname(flashinfer.__file__))')
  (cd "$fi_dir" && tar -cJf - jit/gemm/core.py data/csrc/*_gemm_cutlass*.cu data/csrc/*_gemm_cutlass*.jinja) \
    > .carry/flashinfer-dense.tar.xz
  ls -l .carry/*.tar.xz
  exit 0
fi
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
summary=$OUT/gpu-sm100-virtual.txt
start=$(date +%s%N)
. "$(dirname "$0")/../gpu-env.sh"
tar -xJf .carry/flashinfer-dense.tar.xz -C /tmp/fi || { echo "no .carry/flashinfer-dense.tar.xz" | tee "$summary"; exit 1; }
work=/tmp/sm100-virtual; rm -rf "$work"; mkdir -p "$work"
{ echo "host: $(nproc) cpus, $(free -g | awk '/Mem:/ {print $2}') GB; $(nvcc --version | tail -1)"
  echo "checkout: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); families: ${FAMILIES:-fp4 mxfp8}; jobs ${JOBS:-16}"
  echo "provisioned in $((($(date +%s%N) - start) / 1000000)) ms"
} 2>&1 | tee "$summary"
matrices=()
for family in ${FAMILIES:-fp4 mxfp8}; do
  if [ -f "matrices/gemm-sm100-$family.yaml" ]; then
    cp "matrices/gemm-sm100-$family.yaml" "$work/" && matrices+=(--tile-matrix "gemm-sm100-$family.yaml")
  else
    echo "no matrices/gemm-sm100-$family.yaml in this checkout: $family not judged" | tee -a "$summary"
  fi
done
unset CI  # --tile-update writes the matrices it judged
cd "$work" || exit 1
s=$(date +%s%N)
# SIGINT at the budget: pytest still writes the report of what it judged
timer=(); [ -x /usr/bin/time ] && timer=(/usr/bin/time -f "pytest: %e s wall, %U s user, %M KB most RSS of one process")
timeout -s INT -k 20 "${BUDGET_S:-420}" "${timer[@]}" \
  python3 -m pytest "${plugins[@]}" -p pytest_tileconform.flashinfer_dense.plugin -p no:xdist -q \
  "${matrices[@]}" --tile-device virtual --tile-build-jobs "${JOBS:-16}" --tile-cache-dir /tmp/tccache-sm100 \
  --tile-update --tile-report virtual.json > run.log 2>&1
echo "pytest exit $? after $((($(date +%s%N) - s) / 1000000)) ms" | tee -a "$summary"
tail -n 25 run.log | tee -a "$summary"
gzip -kf virtual.json 2>/dev/null
tar -czf "$OUT/gpu-sm100-virtual.tgz" --ignore-failed-read virtual.json.gz gemm-sm100-*.yaml run.log
