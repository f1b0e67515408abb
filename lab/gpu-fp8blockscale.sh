#!/usr/bin/env bash
# matrices/gemm-sm90-fp8blockscale.yaml (FlashInfer's SM90 FP8 block-scale GEMM: every (input,
# weight) pair its binding runs, both output types its Python accepts, both dispatches, the
# problems that reach DeepGEMM's paths) judged on this host's GPU by the dense backend with
# --tile-update, cold (an empty build cache: the module's one unit, then DeepGEMM's kernels
# compiled by nvcc as the runner first meets each problem), then rerun warm in the same cache.
# The matrix it updated, both reports, the logs and a summary come back as one tarball; the
# checkout takes the expectations with `tileconform report apply MATRIX REPORT` once the summary
# shows no case that failed to compile (a harness that cannot build must not become verdicts).
#
#   lab/gpu-fp8blockscale.sh --carry   (on the CPU machine: .carry/bscale-fi.tar.xz, the parts of
#       the installed FlashInfer this family reads that the common tarball lacks)
#   [COLD_S=185] [WARM_S=45] lab/gpu-fp8blockscale.sh
set -uo pipefail
if [ "${1:-}" = --carry ]; then
  set -e
  py=${PYTHON:-$PWD/.venv/bin/python}
  fi_dir=$(cd /tmp && "$py" -c 'import flashinfer, os; print(os.path.dirname(flashinfer.__file__))')
  mkdir -p .carry
  (cd "$fi_dir" && tar -cJf - jit/gemm/fp8_blockscale.py gemm/gemm_base.py \
    data/csrc/fp8_blockscale_gemm_sm90_binding.cu data/csrc/fused_moe/cutlass_backend/deepgemm_jit_setup.cu) \
    > .carry/bscale-fi.tar.xz
  ls -l .carry/bscale-fi.tar.xz
  exit 0
fi
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/fp8blockscale"
rm -rf /tmp/tcbscale
export TILECONFORM_CACHE_DIR=/tmp/tcbscale
. "$(dirname "$0")/gpu-env.sh"
tar -xJf .carry/bscale-fi.tar.xz -C /tmp/fi || { echo "no .carry/bscale-fi.tar.xz"; exit 1; }
plugins+=(-p pytest_tileconform.flashinfer_dense.plugin)
# the module links -lnvrtc -lcuda (its extra_ldflags): where the toolkit has no libnvrtc.so or
# libcuda.so, the pip package's NVRTC and the driver's libcuda.so.1 stand in (link and run)
libs=/tmp/bscale-libs; mkdir -p "$libs"
cu=$(python3 -c 'from pytest_tileconform.flashinfer.sources import find_cuda_home; print(find_cuda_home())')
nvrtc=$(python3 -c 'import glob, nvidia, os; print(next(iter(sorted(f for p in nvidia.__path__ for f in glob.glob(os.path.join(p, "*", "lib", "libnvrtc.so*")) if "builtins" not in f)), ""))')
[ -e "$cu/lib64/libnvrtc.so" ] || [ -z "$nvrtc" ] || ln -sf "$nvrtc" "$libs/libnvrtc.so"
driver=$(ldconfig -p | awk '/libcuda.so.1 / {print $NF; exit}')
[ -e "$cu/lib64/libcuda.so" ] || ln -sf "${driver:-$cu/lib64/stubs/libcuda.so}" "$libs/libcuda.so"
export LIBRARY_PATH=$libs${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=${nvrtc:+$(dirname "$nvrtc"):}${LD_LIBRARY_PATH:-}
MATRIX=matrices/gemm-sm90-fp8blockscale.yaml
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  echo "cuda $cu; nvrtc ${nvrtc:-toolkit}; driver ${driver:-none}"; ls -l "$libs"; } 2>&1 | tee "$OUT/fp8blockscale/host.txt"
run() {  # NAME SECONDS: one pytest run, stopped with SIGINT (it still writes its report) at SECONDS
  local start=$(date +%s%N)
  timeout -s INT "$2" python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix "$MATRIX" \
    --tile-device hardware --tile-build-jobs "$(nproc)" --tile-update \
    --tile-report "$OUT/fp8blockscale/$1.json" > "$OUT/fp8blockscale/$1.log" 2>&1
  echo "$1: rc=$? $((($(date +%s%N) - start) / 1000000)) ms" | tee -a "$OUT/fp8blockscale/host.txt"
  tail -4 "$OUT/fp8blockscale/$1.log"
}
cp "$MATRIX" "$OUT/fp8blockscale/matrix-before.yaml"
run cold "${COLD_S:-185}"
cp "$MATRIX" "$OUT/fp8blockscale/matrix-cold.yaml"
run warm "${WARM_S:-45}"
python3 - "$OUT/fp8blockscale/cold.json" <<'EOF' | tee "$OUT/fp8blockscale/summary.txt"
import collections, json, sys
try:
    cases = json.load(open(sys.argv[1]))["cases"]
except (OSError, ValueError) as exc:
    sys.exit(f"no report: {exc}")
by = collections.Counter((c["outcome"], (c.get("verdict") or {}).get("failed_stage")) for c in cases)
print(len(cases), "cases:", dict(by))
for c in cases:
    v = c.get("verdict") or {}
    x = v.get("extra") or {}
    print(c["id"], v.get("failed_stage") or c["outcome"], v.get("status", ""), str(v.get("detail", ""))[:200],
          x.get("deepgemm_config"), str(x.get("numerics", ""))[:160], str(x.get("numerics_full", ""))[:120])
EOF
tar -czf "$OUT/fp8blockscale.tar.gz" -C "$OUT" fp8blockscale && rm -rf "$OUT/fp8blockscale"
