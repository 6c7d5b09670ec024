#!/usr/bin/env bash
# Stop 56: the dispatcher's new rule (medium's own block overhead, large weighed at a short k),
# out of sample. device-stage-d/cukernels-bench is this commit's sm_90 bench (`CUKERNELS_ARCHS=sm_90
# cargo build --release -p cukernels-bench`), which times every candidate of each shape; for
# seeds ${SEEDS} it times the shapes of changed-labels.txt (those whose choice the rule changes), so
# that `scripts/sgemm-regret.py --rule before-medium-overhead` replays the old choice on the
# same timings.
D=benches/results/2026-12-07-sgemm-medium-overhead
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
start=$(date +%s)
for seed in ${SEEDS:-11 12 13 14 15 16 17 18 19 20 21 22 23 24}; do
  [ $(( $(date +%s) - start )) -gt ${BUDGET_S:-330} ] && { echo "seed $seed: skipped (time)" >> $OUT/summary.txt; continue; }
  shapes=()
  while read -r s l; do [ "$s" = $seed ] && shapes+=(--shape "$l"); done < $D/changed-labels.txt
  t=$(date +%s); CUKERNELS_SWEEP_SEED=$seed timeout 60 device-stage-d/cukernels-bench sgemm --reps 15 "${shapes[@]}" --out $OUT/sgemm-seeds.jsonl > $OUT/sgemm-seed$seed.log 2>&1
  echo "seed $seed ($(( ${#shapes[@]} / 2 )) shapes): exit $? in $(( $(date +%s) - t )) s" >> $OUT/summary.txt
done
python3 scripts/sgemm-regret.py --rule current $OUT/sgemm-seeds.jsonl > $OUT/regret-current.txt 2>&1
python3 scripts/sgemm-regret.py --rule before-medium-overhead $OUT/sgemm-seeds.jsonl > $OUT/regret-before.txt 2>&1
cat $OUT/summary.txt; head -2 $OUT/regret-current.txt; head -2 $OUT/regret-before.txt | tail -1
cd $OUT && tar czf logs.tgz sgemm-seed*.log && rm sgemm-seed*.log
