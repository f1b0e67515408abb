#!/usr/bin/env bash
# One GPU against all of them, on builds that are already cached (run after gpu-record.sh in
# the same machine lease): the same slice with one xdist worker and with `-n auto` (one worker
# per GPU), then the two reports compared verdict for verdict.
#
#   [RUNS="1 auto 4"] scripts/gpu-speedup.sh MATRIX KEYWORD NAME   (-n values; the first two are compared)
set -uo pipefail
matrix=$1 keyword=$2 name=$3
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
pack() { tar -czf "$out/$name.tgz" -C "$work" .; }
. "$(dirname "$0")/gpu-env.sh"
pytest=(python3 -m pytest "${plugins[@]}" -q --tile-matrix "$matrix" -k "$keyword" --tile-device hardware)
nvidia-smi -L > "$work/$name-gpus.txt"
for n in ${RUNS:-1 auto}; do
  start=$(date +%s)
  "${pytest[@]}" -n "$n" --tile-report "$work/$name-n$n.json" > "$work/$name-n$n.log" 2>&1
  echo "-n $n: exit $? in $(( $(date +%s) - start )) s" | tee -a "$work/$name-times.txt"
  grep -m1 -o "[0-9]* workers" "$work/$name-n$n.log" | sed "s/^/-n $n: /" >> "$work/$name-times.txt"
  pack
done
python3 - "$work/$name-n1.json" "$work/$name-nauto.json" > "$work/$name-compare.txt" 2>&1 <<'PY'
import collections, json, sys
runs = [{c["id"]: c for c in json.load(open(p))["cases"]} for p in sys.argv[1:]]
key = lambda c: (c["outcome"], (c.get("verdict") or {}).get("failed_stage"), (c.get("verdict") or {}).get("smem_requested"))
for label, run in zip(("-n 1", "-n auto"), runs):
    gpus = collections.Counter(((c.get("verdict") or {}).get("extra") or {}).get("gpu") for c in run.values())
    workers = collections.Counter(c.get("worker", "?") for c in run.values())
    print(f"{label}: cases per GPU {dict(gpus)}, per worker {dict(workers)}")
same = [i for i in runs[0] if i in runs[1] and key(runs[0][i]) == key(runs[1][i])]
for i in sorted(runs[0].keys() ^ runs[1].keys()):
    print(f"only in one run: {i}")
for i in sorted(set(runs[0]) & set(runs[1]) - set(same)):
    print(f"DIFFERENT {i}: {key(runs[0][i])} vs {key(runs[1][i])}")
print(f"{len(same)}/{len(runs[0])} verdicts equal (outcome, failed stage, shared memory)")
PY
pack; tail -1 "$work/$name-compare.txt"; cat "$work/$name-times.txt"
