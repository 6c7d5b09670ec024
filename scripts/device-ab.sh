#!/usr/bin/env bash
# A/B of a kernel change on the GPU machine: two benchmark binaries, the change's and its base's,
# timed in the same run, alternating (ROUNDS times each, default 2), so that clock and thermal
# drift fall on both alike. AB_OP picks the benchmark (sgemm, the default; attention; moe),
# AB_ARGS adds arguments to each run (e.g. "--reps 15"), AB_STAGE names the folder of the two
# binaries (default device-stage). Stage them first (here):
#   CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench --bin cukernels-bench --target-dir target/sm90
#   cp target/sm90/release/cukernels-bench $AB_STAGE/cukernels-bench-new   (and the base's, built
#   from a worktree of the base commit, as $AB_STAGE/cukernels-bench-base)
# then on the device: bash scripts/device-ab.sh [shapes-file]   (one shape label a line, spaces kept; default all)
# Results: $OUT/ab-{base,new}-ROUND.jsonl, the runs' output in $OUT/ab.log, and the comparison
# (benches/sgemm_ab.py for SGEMM, benches/label_ab.py for the others) in $OUT/ab-summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${AB_STAGE:-device-stage}
op=${AB_OP:-sgemm}
read -ra extra_args <<< "${AB_ARGS:-}"
OUT=${OUT:-/tmp/cukernels-out}
mkdir -p "$OUT"
shape_args=()
if [ $# -ge 1 ]; then
  while IFS= read -r label; do [ -n "$label" ] && shape_args+=(--shape "$label"); done < "$1"
fi
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for side in base new; do
    start=$(date +%s)
    timeout "${AB_TIMEOUT:-280}" $stage/cukernels-bench-$side "$op" "${extra_args[@]}" --out "$OUT/ab-$side-$round.jsonl" "${shape_args[@]}" > /tmp/ab-run.log 2>&1 \
      || { echo "$side round $round failed"; tail -5 /tmp/ab-run.log; status=1; }
    # One log for all runs: the device tool brings back only so many files.
    { echo "== $side round $round"; cat /tmp/ab-run.log; } >> "$OUT/ab.log"
    echo "$side round $round: $(( $(date +%s) - start )) s" | tee -a "$OUT/ab-summary.txt"
  done
done
compare=benches/label_ab.py
[ "$op" = sgemm ] && compare=benches/sgemm_ab.py
python3 "$compare" "$OUT"/ab-base-*.jsonl -- "$OUT"/ab-new-*.jsonl | tee -a "$OUT/ab-summary.txt"
exit $status
