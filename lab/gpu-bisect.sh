#!/usr/bin/env bash
# `tileconform bisect` on the GPU host for two public reports (docs/field-reports.md, "Release
# bisections on the H200"), through the hardware stages: graph (8 replays), repeat (3) and
# sequence (N runs alone, N GEMM 1 -> GEMM 2 pairs on one workspace and stream with the case's
# PDL, the pair captured in a CUDA graph and replayed N times).
#   1. every unit is compiled first, one `bisect --device compile` per release side by side (two
#      compiles each: 16 on the 16 cores), so that the bisections judge from the cache;
#   2. the two bisections, side by side, with --all (every release judged, not only the ends):
#      fp8 (#4036): SM90 fp8_e4m3 -> bf16 128x128x128, none (GEMM 1) and finalize (GEMM 2),
#         PDL on and off, a 8-expert problem with empty, single-row and ragged groups;
#      decode (vLLM #42906): the same instantiations at a decode-sized problem (1-3 rows per
#         expert), PDL as FlashInfer decides (on for SM90).
# The host has no package index: the releases come as cache entries (ENTRIES.tar.xz, as
# lab/gpu-releases.sh takes them).
#
#   [N=2000] [LIMIT=500] lab/gpu-bisect.sh ENTRIES.tar.xz FP8-RELEASES DECODE-RELEASES
#
# RELEASES: comma-separated, oldest first. LIMIT: seconds from the start after which the
# bisections are interrupted. Into $OUT: bisect-{fp8,decode}.{json.gz,txt,log},
# compile-V.log, times.txt.
set -uo pipefail
entries=$1 fp8_releases=$2 decode_releases=$3
n=${N:-2000} limit=${LIMIT:-500} start=$(date +%s)
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pycache
unset PYTHONDONTWRITEBYTECODE
cache=/tmp/tc-bisect
mkdir -p "$cache/flashinfer-releases"
tar -xJf "$entries" -C "$cache/flashinfer-releases" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/times.txt"
# the bisect module directly: `tileconform`'s commands come from entry points, and nothing is
# installed here (PYTHONPATH only)
run='import argparse, sys; from pytest_tileconform.flashinfer.commands import bisect as b
p = argparse.ArgumentParser(prog="tileconform bisect"); b.configure_parser(p); sys.exit(b.main(p.parse_args()))'
B=(python3 -c "$run" --arch sm90 --dtype fp8_e4m3:fp8_e4m3:bf16 --tile 128x128x128
   --fusion none --fusion finalize --cache-dir "$cache" --build-group 1)
FP8=(--pdl true --pdl false --problem 8:0,1,77,300,513,1024,64,200:1024:1024)
DECODE=(--problem 8:1,0,2,1,0,3,1,0:3072:1536)
releases=$(echo "$fp8_releases,$decode_releases" | tr , '\n' | sort -uV)
for v in $releases; do
  timeout -k 10 300 "${B[@]}" "${FP8[@]}" --releases "$v" --device compile --build-jobs 2 \
    > "$OUT/compile-$v.log" 2>&1 &
done
wait
echo "compiled: $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
left=$(( limit - ($(date +%s) - start) ))
judge() {  # NAME RELEASES ARGS...
  local name=$1 releases=$2 s; shift 2; s=$(date +%s)
  timeout -s INT -k 15 "$left" "${B[@]}" "$@" --releases "$releases" --all --device hardware \
    --sequence "$n" --build-jobs 4 --json "$OUT/bisect-$name.json" > "$OUT/bisect-$name.txt" 2> "$OUT/bisect-$name.log"
  echo "$name: exit $? in $(( $(date +%s) - s )) s" >> "$OUT/times.txt"
}
judge fp8 "$fp8_releases" "${FP8[@]}" &
judge decode "$decode_releases" "${DECODE[@]}" &
wait
cat "$OUT/times.txt"
for name in fp8 decode; do echo "== $name"; cat "$OUT/bisect-$name.txt"; tail -3 "$OUT/bisect-$name.log"; done
gzip -f "$OUT"/bisect-*.json 2>/dev/null
true
