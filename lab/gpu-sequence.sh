#!/usr/bin/env bash
# The sequence stage on this host's GPU (operands in device memory):
#   1. the smoke matrix with --tile-sequence N (N runs of each case alone, N GEMM 1 (fusion
#      none) -> GEMM 2 (finalize) pairs of the case's tile on one workspace and stream, one pair
#      captured in a CUDA graph and replayed N times; every D compared with the serialized
#      run's on the device), cold, then warm: every case must pass, through sequence, paired
#      none -> finalize;
#   2. the smoke matrix again with the test plugin's workspace-race fault in every case
#      (tests/helpers/plugins/tileconform_faults.py: a kernel on a second stream keeps overwriting the
#      CUTLASS workspace while each GEMM after the checked run reads it), the graph and repeat
#      stages off: every case must fail at sequence;
#   3. one case at DeepSeek-V3 prefill size (benchmarks/dsv3-prefill.yaml, GEMM 1 128x128x64,
#      PDL on) with --tile-sequence N and 5 timed calls, the graph and repeat stages off: what
#      N at model size costs beside its GEMMs (seconds.harness against kernel_ms x launches).
# Into $OUT: sequence-{cold,warm,fault,model}.json.gz and .log, sequence-summary.txt (every
# check OK or BAD).
#
# N (1000), COLD_LIMIT, WARM_LIMIT, FAULT_LIMIT, MODEL_LIMIT: seconds each step may take
# (170, 50, 50, 100; each session is interrupted with SIGINT, so its report is still written);
# MODEL_LIMIT=0 leaves step 3 out.
#
#   lab/gpu-sequence.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
n=${N:-1000}
. "$(dirname "$0")/gpu-env.sh"
export PYTHONPATH="$PWD/tests/helpers/plugins:$PYTHONPATH"  # the fault plugin: a test plugin, not the package
# one configuration (and its fc1 -> fc2 partner) per unit: the model-size case reuses the smoke matrix's bf16 128x128x64 unit
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-device hardware --tile-build-jobs "$(nproc)"
   --tile-build-group 1)
S=matrices/smoke-sm90.yaml
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step() {  # NAME LIMIT ARGS...: one session, its time and its last lines
  local name=$1 limit=$2 s; shift 2; s=$(date +%s)
  timeout -s INT -k 20 "$limit" "${P[@]}" "$@" --tile-report "$OUT/sequence-$name.json" > "$OUT/sequence-$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - s )) s"; tail -3 "$OUT/sequence-$name.log"
}
step cold "${COLD_LIMIT:-170}" --tile-matrix "$S" --tile-sequence "$n"
step warm "${WARM_LIMIT:-50}" --tile-matrix "$S" --tile-sequence "$n"
faults=()
for id in $(python3 -c 'import json, sys; print(*(c["id"] for c in json.load(open(sys.argv[1]))["cases"]))' \
    "$OUT/sequence-warm.json"); do
  faults+=(--tile-inject-fault "$id=workspace-race")
done
step fault "${FAULT_LIMIT:-50}" --tile-matrix "$S" -p tileconform_faults "${faults[@]}" --tile-sequence "$n" \
  --tile-graph-replays 0 --tile-repeats 0
[ "${MODEL_LIMIT:-100}" = 0 ] || step model "${MODEL_LIMIT:-100}" --tile-matrix benchmarks/dsv3-prefill.yaml -k "gemm1 and 128x128x64 and not nopdl" \
  --tile-sequence "$n" --tile-graph-replays 0 --tile-repeats 0 --tile-timing-iters 5

python3 - "$OUT" "$n" <<'PY' | tee "$OUT/sequence-summary.txt"
import json, sys
from pathlib import Path

out, n = Path(sys.argv[1]), int(sys.argv[2])


def cases(name):
    try:
        return {c["id"]: c["verdict"] for c in json.loads((out / f"sequence-{name}.json").read_text())["cases"]}
    except (OSError, ValueError, KeyError) as exc:
        print(f"BAD  {name}: not readable ({exc})")
        return {}


def check(what, ok, detail=""):
    print(f"{'OK ' if ok else 'BAD'}  {what}{': ' + detail if detail else ''}")


for name in ("cold", "warm"):
    got = cases(name)
    check(f"{name}: 6 cases", len(got) == 6, str(len(got)))
    for cid, v in sorted(got.items()):
        seq = v["extra"].get("sequence") or {}
        check(
            f"{name} {cid} passes through sequence",
            v["outcome"] == "pass" and v["judged_through"] == "sequence" and seq.get("runs") == 5 * n
            and str(seq.get("pair", "")).startswith("none -> finalize"),
            f"{v['outcome']} through {v['judged_through']}; sequence {seq}; seconds {v['extra'].get('seconds')}",
        )
for cid, v in sorted(cases("fault").items()):
    check(f"workspace-race {cid} fails at sequence", v["outcome"] == "sequence",
          f"{v['outcome']} ({v.get('status')}): {v.get('detail', '')[:300]}")
for cid, v in sorted(cases("model").items()):
    e = v["extra"]
    runs = (e.get("sequence") or {}).get("runs", 0)
    kernel = e.get("kernel_ms") or 0.0
    harness = (e.get("seconds") or {}).get("harness", 0.0)
    check(
        f"model {cid} passes through sequence",
        v["outcome"] == "pass" and runs == 5 * n,
        f"{runs} sequence runs, kernel_ms {kernel}, launches {e.get('launches')}, harness {harness} s, "
        f"beside its GEMMs {harness - kernel * e.get('launches', 0) / 1000:.2f} s",
    )
PY
for f in cold warm fault model; do [ -f "$OUT/sequence-$f.json" ] && gzip -f "$OUT/sequence-$f.json"; done
