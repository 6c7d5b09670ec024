#!/usr/bin/env bash
# Profiles the MoE matmul with Nsight Compute (clocks left as they are), one launch per shape:
# speed of light, occupancy, scheduler issue, and the warp stall breakdown (cycles stalled per
# issued instruction, by reason). Full reports and a summary under $OUT.
# Usage: CONFIG=sm_90 bash scripts/ncu-moe.sh [shape-label-substring...]
#   (default: the Qwen3 shape at T = 512 and 2048, q4_0; the tiled kernel)
S=${STAGE:-device-stage}
OUT=${OUT:-/tmp/cukernels-out}
CONFIG=${CONFIG:-sm_90}
KERNEL=${KERNEL:-tiled}
[ $# -eq 0 ] && set -- "qwen3-30b-a3b q4_0 T512 " "qwen3-30b-a3b q4_0 T2048 "
sections="--section LaunchStats --section Occupancy --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
stalls="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
i=0
for shape in "$@"; do
  i=$((i + 1))
  name="ncu_moe_${CONFIG}_$i"
  ncu --clock-control none -k "regex:cukernels_moe_$KERNEL" --launch-skip 3 --launch-count 1 $sections $stalls -f -o "$OUT/$name" \
    $S/cukernels-bench moe --config "$CONFIG" --shape "$shape" --reps 3 > "$OUT/$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page details > "$OUT/$name.txt" 2>&1
  echo "== $shape ($CONFIG)"
  ncu -i "$OUT/$name.ncu-rep" --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) >= 3:
    for name, value in sorted(((n, v) for n, v in zip(rows[0], rows[2]) if "issue_stalled" in n), key=lambda x: -float(x[1] or 0))[:10]:
        print(f"    stall {name.split(\"stalled_\")[1].split(\"_per\")[0]:<24} {value}")
' 2>/dev/null
  grep -E "cukernels_moe|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Issue Slots Busy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Ipc|Stall" "$OUT/$name.txt" | head -40
done
