#!/usr/bin/env bash
# Profiles flash attention with Nsight Compute (clocks left as they are), one launch per shape:
# speed of light (tensor pipe, shared memory, DRAM), occupancy, scheduler issue, warp stall
# breakdown. Full reports and a summary under $OUT.
# Usage: bash scripts/ncu-attention.sh [shape-label-substring...]
#   (default: the head-128 f16 prefill at 4096 and the one-sequence decode at 16k keys)
S=${STAGE:-device-stage}
OUT=${OUT:-/tmp/cukernels-out}
[ $# -eq 0 ] && set -- "prefill b4 q4096 k4096 h16/16 d128 f16" "decode b1 q1 k16384 h32/8 d128 f16"
sections="--section LaunchStats --section Occupancy --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
# Where the warps wait: cycles stalled per issued instruction, by reason.
stalls="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
i=0
for shape in "$@"; do
  i=$((i + 1))
  ncu --clock-control none -k 'regex:cukernels_attention_(decode_)?[0-9]' --launch-skip 3 --launch-count 1 $sections $stalls -f -o "$OUT/ncu_attn_$i" \
    $S/cukernels-bench attention --shape "$shape" --reps 3 > "$OUT/ncu_attn_$i.log" 2>&1
  ncu -i "$OUT/ncu_attn_$i.ncu-rep" --page details > "$OUT/ncu_attn_$i.txt" 2>&1
  echo "== $shape"
  ncu -i "$OUT/ncu_attn_$i.ncu-rep" --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) >= 3:
    for name, value in sorted(((n, v) for n, v in zip(rows[0], rows[2]) if "issue_stalled" in n), key=lambda x: -float(x[1] or 0))[:10]:
        print(f"    stall {name.split(\"stalled_\")[1].split(\"_per\")[0]:<24} {value}")
' 2>/dev/null
  grep -E "cukernels_attention|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|Issue Slots Busy|Issued Ipc|Shared Memory|No Eligible|Warp Cycles Per Issued|Executed Ipc|pipe|Stall" "$OUT/ncu_attn_$i.txt" | head -60
done
