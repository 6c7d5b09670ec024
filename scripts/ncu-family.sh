#!/usr/bin/env bash
# Profiles one kernel family with Nsight Compute (clocks left as they are), one launch per
# shape: speed of light, occupancy, scheduler issue, and where the warps wait (cycles stalled per
# issued instruction, by reason). Full reports and a summary under $OUT.
# Usage: CONFIG=sm_90 bash scripts/ncu-family.sh attention|moe [shape-label-substring...]
#   attention: the forward kernels (default shapes: the head-128 f16 prefill at 4096 and the
#              one-sequence decode at 16k keys)
#   moe:       the kernels matching KERNEL (default: tiled; shapes: Qwen3 q4_0 at T = 512 and 2048)
S=${STAGE:-device-stage}
OUT=${OUT:-/tmp/cukernels-out}
CONFIG=${CONFIG:-sm_90}
family=${1:?attention or moe}; shift
case "$family" in
  attention)
    kernels='regex:cukernels_attention_(decode_)?[0-9]'
    [ $# -eq 0 ] && set -- "prefill b4 q4096 k4096 h16/16 d128 f16" "decode b1 q1 k16384 h32/8 d128 f16" ;;
  moe)
    kernels="regex:cukernels_moe_${KERNEL:-tiled}"
    [ $# -eq 0 ] && set -- "qwen3-30b-a3b q4_0 T512 " "qwen3-30b-a3b q4_0 T2048 " ;;
  *) echo "unknown family $family (attention or moe)"; exit 2 ;;
esac
sections="--section LaunchStats --section Occupancy --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
stalls="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
i=0
for shape in "$@"; do
  i=$((i + 1))
  name="ncu_${family}_${CONFIG}_$i"
  ncu --clock-control none -k "$kernels" --launch-skip 3 --launch-count 1 $sections $stalls -f -o "$OUT/$name" \
    $S/cukernels-bench "$family" --config "$CONFIG" --shape "$shape" --reps 3 > "$OUT/$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page details > "$OUT/$name.txt" 2>&1
  echo "== $shape ($CONFIG)"
  grep -E "issue_stalled" "$OUT/$name.txt" | awk '{print $1, $NF}' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | sort -k2 -gr | head -8 | sed 's/^/    stall /'
  grep -E "cukernels_|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|L1/TEX Hit Rate|Issue Slots Busy|Issued Ipc|Shared Memory|No Eligible|Warp Cycles Per Issued|Executed Ipc" "$OUT/$name.txt" | head -40
done
