#!/usr/bin/env bash
# Dense GEMM matrices judged on their virtual devices with the GPU host's CPUs only (--tile-device
# virtual: no kernel runs, the GPU is not used): by default the SM100 ones, every tactic FlashInfer
# 0.7.4's autotuner offers for mm_fp4 (matrices/gemm-sm100-fp4.yaml) and mm_mxfp8
# (matrices/gemm-sm100-mxfp8.yaml); MATRICES names others (matrices/NAME.yaml, any arch: each
# case runs on its own arch's virtual profile). Cold, in one pytest run, so the units (one per
# output type and CTA tile, each holding the tile's cluster-shape tactics) compile JOBS at a
# time; --tile-update writes the matrices' expectations, --tile-report the report.
# Into $OUT: gpu-sm100-virtual.txt (host, times, the run's summary) and gpu-sm100-virtual.tgz
# (the report as .json.gz, the updated matrices, the run's log).
#
# Budget (< 9 min a call): a unit is about 82-100 CPU-s and 5-6 GB (the H200 host judged the 16
# SM100 fp4 and mxfp8 units in 131.9 s wall, 1,625 CPU-s); over 16 cores and 128 GB that is about
# one unit's wall time per 16 units, plus provisioning. BUDGET_S stops pytest with SIGINT (it
# still writes the report) so the tarball always comes back.
#
# Carry (git-ignored, so named in the run's carry): .whl/ and .carry/flashinfer-data.tar.xz as
# every lab script (lab/gpu-env.sh), and .carry/flashinfer-dense.tar.xz: the installed FlashInfer's
# GEMM generator (jit/gemm/core.py) and its dense CUTLASS templates and bindings
# (data/csrc/*_gemm_cutlass*.{jinja,cu}), which the dense backend reads and the common tarball
# lacks. On the CPU machine, from the repository root, `bash lab/dense/gpu-sm100-virtual.sh --carry`
# makes all three from /work/main/.carry/common and the installed FlashInfer.
#
#   [MATRICES="gemm-sm100-fp4 gemm-sm100-mxfp8"] [JOBS=16] [BUDGET_S=420] [WARM=1] lab/dense/gpu-sm100-virtual.sh [--carry]
#
# WARM=1: then judges the same matrices again on the same build cache (no --tile-update), the warm
# rerun's time into the summary.
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
  echo "checkout: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); matrices: ${MATRICES:-gemm-sm100-fp4 gemm-sm100-mxfp8}; jobs ${JOBS:-16}"
  echo "provisioned in $((($(date +%s%N) - start) / 1000000)) ms"
} 2>&1 | tee "$summary"
matrices=()
for name in ${MATRICES:-gemm-sm100-fp4 gemm-sm100-mxfp8}; do
  if [ -f "matrices/$name.yaml" ]; then
    cp "matrices/$name.yaml" "$work/" && matrices+=(--tile-matrix "$name.yaml")
  else
    echo "no matrices/$name.yaml in this checkout: not judged" | tee -a "$summary"
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
if [ -n "${WARM:-}" ]; then  # the same matrices again on the same cache: the warm rerun's time
  s=$(date +%s%N)
  timeout -s INT -k 20 120 python3 -m pytest "${plugins[@]}" -p pytest_tileconform.flashinfer_dense.plugin \
    -p no:xdist -q "${matrices[@]}" --tile-device virtual --tile-build-jobs "${JOBS:-16}" \
    --tile-cache-dir /tmp/tccache-sm100 > warm.log 2>&1
  echo "warm rerun: pytest exit $? after $((($(date +%s%N) - s) / 1000000)) ms; $(tail -n 1 warm.log)" | tee -a "$summary"
fi
gzip -kf virtual.json 2>/dev/null
tar -czf "$OUT/gpu-sm100-virtual.tgz" --ignore-failed-read virtual.json.gz ./*.yaml run.log
