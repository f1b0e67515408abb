#!/usr/bin/env bash
# The hardware stages and the injected faults on this host's GPU, through the case runner:
#   1. the smoke matrix with PDL on and off (each case twice), the graph stage (8 replays), the
#      repeat stage (3 runs) and 20 timed launcher calls: every case must pass;
#   2. one run with a fault injected into each of the six smoke cases (the test plugin
#      tests/helpers/plugins/tileconform_faults.py, through the harness's hook), each of which must end
#      at its stage: trap -> run, uninit-workspace -> numerics, unwritten-d -> numerics,
#      race -> graph, pending-error -> prepare (cleared, recorded), pending-after -> run (all six
#      cases carry a fault);
#   3. the race again without the graph stage: it must fail at repeat;
#   4. one case under compute-sanitizer: memcheck (must be clean), then initcheck, racecheck and
#      synccheck while within the time budget; their reports are copied to $OUT/sanitize/.
# Every check prints OK or BAD; $OUT/faults-summary.txt has them all.
#
#   lab/gpu-faults.sh      (reports and logs go to $OUT, default ./gpu-out)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/sanitize"
. "$(dirname "$0")/gpu-env.sh"
export PYTHONPATH="$PWD/tests/helpers/plugins:$PYTHONPATH"  # the fault plugin: a test plugin, not the package
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-device hardware)
t(){ local s; s=$(date +%s%N); "$@"; echo "rc=$? $(( ($(date +%s%N)-s)/1000000 )) ms"; }
nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer || echo "no compute-sanitizer found"

# the smoke matrix with both PDL settings
M="$OUT/smoke-pdl.yaml"
sed 's/^defaults:$/defaults:\n  pdl: [true, false]/' matrices/smoke-sm90.yaml > "$M"
t "${P[@]}" --tile-matrix "$M" --tile-timing-iters 20 --tile-report "$OUT/pdl.json" > "$OUT/pdl.log" 2>&1
tail -4 "$OUT/pdl.log"

S=matrices/smoke-sm90.yaml
BF16=sm90-bf16-128x128x64-c1x1x1-none
t "${P[@]}" --tile-matrix "$S" -p tileconform_faults \
  --tile-inject-fault "$BF16=uninit-workspace" \
  --tile-inject-fault "sm90-fp16-256x128x64-c2x1x1-none=trap" \
  --tile-inject-fault "sm90-fp32-128x64x32-c1x1x1-none=race" \
  --tile-inject-fault "sm90-fp8_e4m3-bf16-128x128x128-c1x2x1-finalize=unwritten-d" \
  --tile-inject-fault "sm90-fp8_e4m3-fp16-128x128x128-c1x2x1-finalize=pending-error" \
  --tile-inject-fault "sm90-bf16-128x16x64-c1x1x1-finalize-swapab=pending-after" \
  --tile-report "$OUT/faults.json" > "$OUT/faults.log" 2>&1
tail -12 "$OUT/faults.log"
t "${P[@]}" --tile-matrix "$S" -p tileconform_faults -k fp32 --tile-graph-replays 0 \
  --tile-inject-fault "sm90-fp32-128x64x32-c1x1x1-none=race" \
  --tile-report "$OUT/race-repeat.json" > "$OUT/race-repeat.log" 2>&1
tail -3 "$OUT/race-repeat.log"

# memcheck always; the other tools while the run is within its budget (about 8 minutes)
for mode in memcheck initcheck racecheck synccheck; do
  if [ "$mode" != memcheck ] && [ "$SECONDS" -gt "${SANITIZE_BUDGET:-330}" ]; then echo "skipped $mode: ${SECONDS}s used"; continue; fi
  t timeout 150 "${P[@]}" --tile-matrix "$S" -k "$BF16" --tile-sanitize "$mode" --tile-timeout 120 \
    --tile-report "$OUT/sanitize-$mode.json" > "$OUT/sanitize-$mode.log" 2>&1
  tail -1 "$OUT/sanitize-$mode.log"
done
echo "total ${SECONDS}s"

python3 - "$OUT" <<'EOF' | tee "$OUT/faults-summary.txt"
import json, shutil, sys
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


pdl = cases("pdl.json")
check("pdl on/off, graph, repeat: 12 cases", len(pdl) == 12, f"{len(pdl)} cases")
check("  operands in device memory", all(c["verdict"]["extra"].get("operands") == "device memory" for c in pdl.values()),
      str({c["verdict"]["extra"].get("operands") for c in pdl.values()}))
for cid, c in sorted(pdl.items()):
    extra = c["verdict"]["extra"]
    check(f"  {cid}", c["verdict"]["outcome"] == "pass" and c["verdict"]["judged_through"] == "repeat",
          f"{c['outcome']} through {c['verdict']['judged_through']}, pdl={extra.get('pdl')}, "
          f"kernel_ms={extra.get('kernel_ms')}, graph={extra.get('graph')}, repeat={extra.get('repeat')}")
check("  both PDL settings ran", {c["verdict"]["extra"].get("pdl") for c in pdl.values()} == {True, False})

expected = {
    "sm90-bf16-128x128x64-c1x1x1-none": "numerics",  # uninit-workspace
    "sm90-fp16-256x128x64-c2x1x1-none": "run",  # trap
    "sm90-fp32-128x64x32-c1x1x1-none": "graph",  # race, after the trap's new runner
    "sm90-fp8_e4m3-bf16-128x128x128-c1x2x1-finalize": "numerics",  # unwritten-d
    "sm90-fp8_e4m3-fp16-128x128x128-c1x2x1-finalize": "prepare",  # pending-error
    "sm90-bf16-128x16x64-c1x1x1-finalize-swapab": "run",  # pending-after
}
faults = cases("faults.json")
for cid, stage in expected.items():
    c = faults.get(cid)
    got = c["verdict"]["outcome"] if c else "missing"
    detail = f"{got}" + (f" ({c['verdict']['status']}: {c['verdict']['detail'][:160]})" if c else "")
    check(f"fault run {cid} ends at {stage}", got == stage, detail)
pending = faults.get("sm90-fp8_e4m3-fp16-128x128x128-c1x2x1-finalize")
cleared = pending["verdict"]["extra"].get("cleared_errors") if pending else None
check("pending error cleared and recorded", bool(cleared), str(cleared))
race = cases("race-repeat.json").get("sm90-fp32-128x64x32-c1x1x1-none")
check("race without graphs ends at repeat", bool(race) and race["verdict"]["outcome"] == "repeat",
      race["verdict"]["outcome"] if race else "missing")

for mode in ("memcheck", "initcheck", "racecheck", "synccheck"):
    if mode != "memcheck" and not (out / f"sanitize-{mode}.json").exists():
        continue
    c = cases(f"sanitize-{mode}.json").get("sm90-bf16-128x128x64-c1x1x1-none")
    sanitizer = c["verdict"]["extra"].get("sanitizer", {}) if c else {}
    report = sanitizer.get("report")
    if report and Path(report).is_file():
        shutil.copy(report, out / "sanitize" / f"{mode}.log")
        verdict = Path(report).with_name("verdict.json")
        if verdict.is_file():
            shutil.copy(verdict, out / "sanitize" / f"{mode}-verdict.json")
    check(f"sanitize {mode}", bool(c) and (mode != "memcheck" or c["verdict"]["outcome"] == "pass"),
          f"{c['verdict']['outcome'] if c else 'missing'} {sanitizer}")
EOF
