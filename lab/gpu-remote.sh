#!/usr/bin/env bash
# Issue 36's H200 targets for the remote tier, from a local cache another run filled:
#   1. publish that cache ($TILECONFORM_CACHE_DIR, default /tmp/tccache) into a file:// remote
#      tier on this host's disk with the product's own command (`tileconform cache push`);
#   2. a new process, an empty local cache, that remote: the smoke matrix (target < 10 s);
#   3. the same for the whole sm90.yaml, default stages (2,880 cases; target < 2 min);
#   4. the first verdict of one smoke case cold, empty local cache and empty remote
#      (benchmarks/run.py --routine first-verdict; target <= 45 s).
# Each step is under `timeout -s INT` (pytest still writes its report); the whole script stays
# under 300 s. Into $OUT: gpu-remote-summary.txt (each step's exit status and wall time) and
# gpu-remote.tgz (reports, logs, the first-verdict driver's summary), re-packed after each step.
#
#   [DEVICE=hardware] [SMOKE_K=EXPR] [SM90_MATRIX=matrices/sm90.yaml] [SM90_K=EXPR] [FV=1] \
#     lab/gpu-remote.sh
#
# DEVICE=virtual, SCRATCH=DIR (instead of /tmp), the -k slices and FV_LIMIT=S (seconds for step 4,
# default 95) rehearse it on a CPU machine; FV=0 leaves step 4 out.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
filled=${TILECONFORM_CACHE_DIR:-/tmp/tccache}
tmp=${SCRATCH:-/tmp}  # its folders are emptied first: remote, remote-empty, gpu-remote, tc-remote-*
remote=$tmp/remote empty_remote=$tmp/remote-empty work=$tmp/gpu-remote
rm -rf "$remote" "$empty_remote" "$work" "$tmp"/tc-remote-smoke "$tmp"/tc-remote-sm90 "$tmp"/tc-remote-fv
mkdir -p "$work"
. "$(dirname "$0")/gpu-env.sh"
device=${DEVICE:-hardware}
summary=$OUT/gpu-remote-summary.txt
: > "$summary"
note(){ echo "$*" | tee -a "$summary"; }
pack(){ tar -czf "$OUT/gpu-remote.tgz" -C "$work" . ; }
# step NAME LIMIT CACHE COMMAND...: run it in a new process on local cache CACHE, timed
step(){
  local name=$1 limit=$2 cache=$3 s; shift 3
  s=$(date +%s%N)
  TILECONFORM_CACHE_DIR=$cache timeout -s INT -k 10 "$limit" "$@" > "$work/$name.log" 2>&1
  note "$name: exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms; $(tail -1 "$work/$name.log")"
  pack
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  nvcc --version | tail -1; echo "cpus $(nproc); filled cache $filled: $(du -sh "$filled" 2>/dev/null | cut -f1)"
  git log -1 --format='checkout %h %s' 2>/dev/null; } >> "$summary"
cat "$summary"

P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-device "$device" --tile-cache-remote "file://$remote")
step push 45 "$filled" python3 -m pytest_tileconform cache push "file://$remote" --cache-dir "$filled"
note "remote: $(du -sh "$remote" 2>/dev/null | cut -f1), $(find "$remote/entries" -type f 2>/dev/null | wc -l) entries, $(find "$remote/blobs" -type f 2>/dev/null | wc -l) blobs"

step smoke 25 "$tmp"/tc-remote-smoke "${P[@]}" --tile-matrix matrices/smoke-sm90.yaml ${SMOKE_K:+-k "$SMOKE_K"} \
  --tile-report "$work/smoke.json"
step sm90 130 "$tmp"/tc-remote-sm90 "${P[@]}" --tile-matrix "${SM90_MATRIX:-matrices/sm90.yaml}" \
  ${SM90_K:+-k "$SM90_K"} --tile-report "$work/sm90.json"
for name in smoke sm90; do  # compiles in a run from a filled remote: there should be none
  note "$name: $(grep -c 'compil' "$work/$name.log") log lines about compiling; local cache $(du -sh "$tmp/tc-remote-$name" 2>/dev/null | cut -f1)"
done

if [ "${FV:-1}" != 0 ]; then
  step first-verdict "${FV_LIMIT:-95}" "$tmp"/tc-remote-fv env PYTEST_ADDOPTS="${plugins[*]}" python3 benchmarks/run.py \
    --routine first-verdict --name fv --device "$device" --out "$work" --cache-dir "$tmp"/tc-remote-fv \
    -- --tile-cache-remote "file://$empty_remote"
fi
# each report: its cases by outcome, the last verdict after the process's start (startup_s +
# finished_at_s: for first-verdict's one case, the time to the verdict)
python3 - "$work" <<'EOF' | tee -a "$summary"
import collections, gzip, json, sys
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*.json*")):
    if report.name.endswith("summary.json"):
        continue
    raw = report.read_bytes()
    data = json.loads(gzip.decompress(raw) if report.suffix == ".gz" else raw)
    cases = data.get("cases", [])
    done = max((c.get("finished_at_s") or 0.0) for c in cases) if cases else 0.0
    start = data.get("startup_s") or 0.0
    outcomes = dict(collections.Counter(c.get("outcome") for c in cases))
    print(f"{report.name}: {len(cases)} cases {outcomes}; last verdict {start + done:.1f} s after the start")
EOF
pack
