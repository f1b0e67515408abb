#!/usr/bin/env bash
# The numerics check through the path a hardware verdict takes (operands and D in device memory,
# the reference on CUDA), for one case of each SM90 dtype family
# (results/fidelity/h200-2026-12-02-numerics/matrix.yaml):
#   1. every case judged as a user judges it: both input families (exact and full-mantissa,
#      docs/numerics.md), each must pass;
#   2. every case again with the test plugin's scale-d fault (tests/helpers/plugins/tileconform_faults.py:
#      after each GEMM a kernel makes every element of D 1% larger, in D's type): each must fail
#      at numerics;
#   3. what the two families' inputs and expected D cost on CUDA at a prefill size (DeepSeek-V3
#      GEMM 2: 8 experts of 2,048 rows, N 7,168, K 2,048, bf16 and fp8 -> bf16, finalize).
# Into $OUT: numerics-{clean,scaled}.json.gz and .log, numerics-cost.txt, numerics-summary.txt
# (every check OK or BAD).
#
# CLEAN_LIMIT, SCALED_LIMIT, COST_LIMIT: seconds each step may take (280, 90, 60; the two
# sessions are interrupted with SIGINT, so their reports are still written).
#
#   lab/gpu-numerics.sh [MATRIX]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
matrix=${1:-results/fidelity/h200-2026-12-02-numerics/matrix.yaml}
. "$(dirname "$0")/gpu-env.sh"
export PYTHONPATH="$PWD/tests/helpers/plugins:$PWD/tests:$PYTHONPATH"  # the fault plugin, the test helpers
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-device hardware --tile-matrix "$matrix"
   --tile-build-jobs "$(nproc)")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s)
timeout -s INT -k 20 "${CLEAN_LIMIT:-280}" "${P[@]}" --tile-report "$OUT/numerics-clean.json" > "$OUT/numerics-clean.log" 2>&1
echo "clean (cold): exit $? in $(( $(date +%s) - s )) s"; tail -3 "$OUT/numerics-clean.log"
faults=()
for id in $(python3 -c 'import json, sys; print(*(c["id"] for c in json.load(open(sys.argv[1]))["cases"]))' \
    "$OUT/numerics-clean.json"); do
  faults+=(--tile-inject-fault "$id=scale-d")
done
s=$(date +%s)
timeout -s INT -k 20 "${SCALED_LIMIT:-90}" "${P[@]}" -p tileconform_faults "${faults[@]}" --tile-report "$OUT/numerics-scaled.json" \
  > "$OUT/numerics-scaled.log" 2>&1
echo "scaled: exit $? in $(( $(date +%s) - s )) s"; tail -3 "$OUT/numerics-scaled.log"

timeout -k 10 "${COST_LIMIT:-60}" python3 - > "$OUT/numerics-cost.txt" 2>&1 <<'PY'
import time
import torch
from helpers.numerics_standin import case_for
from pytest_tileconform.flashinfer.numerics.full import FAMILIES, expected_for, make_family_inputs
from pytest_tileconform.matrix.schema import Problem

problem = Problem(rows=(2048,) * 8, n=7168, k=2048, bias=False)
for act in ("bf16", "fp8_e4m3"):
    case = case_for(act, act, "bf16", "finalize", problem)
    for family in (*FAMILIES, *FAMILIES):  # twice: the first of each pays for torch's start
        torch.cuda.synchronize(); t0 = time.perf_counter()
        inputs = make_family_inputs(case, 0, family, "cuda")
        torch.cuda.synchronize(); t1 = time.perf_counter()
        expected = expected_for(inputs, case)
        torch.cuda.synchronize(); t2 = time.perf_counter()
        bound = expected.allowed_ulp
        print(f"{act} {family}: inputs {t1 - t0:.3f} s, expected D {t2 - t1:.3f} s, "
              f"bound > 0 on {float((bound > 0).float().mean()):.3f} of D, max {float(bound.max()):.3g} ulp, "
              f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
        del inputs, expected, bound
PY
cat "$OUT/numerics-cost.txt"

python3 - "$OUT" <<'PY' | tee "$OUT/numerics-summary.txt"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])


def cases(name):
    try:
        return {c["id"]: c for c in json.loads((out / name).read_text())["cases"]}
    except (OSError, ValueError, KeyError) as exc:
        print(f"BAD  {name}: not readable ({exc})")
        return {}


def check(what, ok, detail=""):
    print(f"{'OK ' if ok else 'BAD'}  {what}{': ' + detail if detail else ''}")


clean, scaled = cases("numerics-clean.json"), cases("numerics-scaled.json")
check("11 cases judged, twice", len(clean) == len(scaled) == 11, f"{len(clean)}, {len(scaled)}")
for cid, c in sorted(clean.items()):
    v = c["verdict"]
    extra = v["extra"]
    full = extra.get("numerics_full", "missing")
    mixed = "x" in cid.split("-")[1]
    check(
        f"clean {cid}",
        v["outcome"] == "pass" and extra.get("operands") == "device memory"
        and (full.startswith("ok") or (mixed and full.startswith("not generated"))),
        f"{v['outcome']}, {extra.get('operands')}; exact: {extra.get('numerics')}; full: {full}; "
        f"seconds {extra.get('seconds')}",
    )
for cid, c in sorted(scaled.items()):
    v = c["verdict"]
    check(f"scale-d {cid} fails at numerics", v["outcome"] == "numerics",
          f"{v['outcome']} ({v.get('status')}): {v.get('detail', '')[:300]}")
PY
for f in numerics-clean numerics-scaled; do gzip -f "$OUT/$f.json"; done
