. scripts/gpu-env.sh
export TILECONFORM_CACHE_DIR=/tmp/tc-oh
K="fp16 and not fp8 and c1x1x1 or fp16 and not fp8 and c2x1x1 and none"
P=(python3 -m pytest "${plugins[@]}" -q --tile-matrix matrices/sm90.yaml --tile-device hardware -p no:xdist -k "$K")
s=$(date +%s); "${P[@]}" --tile-report $OUT/cold.json > $OUT/cold.log 2>&1; echo "cold $? $(( $(date +%s)-s )) s"
for run in a1 b1 a2 b2; do
  case $run in a*) t=();; b*) t=(env OMP_NUM_THREADS=1);; esac
  "${t[@]}" "${P[@]}" --tile-timing-iters 20 --tile-report $OUT/warm-$run.json > $OUT/warm-$run.log 2>&1
  echo "$run $(tail -1 $OUT/warm-$run.log)"
  python3 benchmarks/case_overhead.py $OUT/warm-$run.json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['overhead'], d['overhead_mean_ms'], d['parts']['check'])"
done
