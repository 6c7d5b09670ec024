#!/usr/bin/env bash
# Profiles SGEMM kernels at 4096^3 with Nsight Compute (clocks left as they are): throughput,
# instruction mix, shared-memory wavefronts and the warp stall breakdown. Logs under $OUT.
# Usage: bash scripts/ncu-sgemm.sh [variant...]   (default: huge large)
S=device-stage
OUT=${OUT:-/tmp/cukernels-out}
stalls=$(for r in barrier dispatch_stall long_scoreboard short_scoreboard math_pipe_throttle mio_throttle not_selected selected wait no_instruction lg_throttle branch_resolving drain misc; do printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done)
[ $# -eq 0 ] && set -- huge large
for v in "$@"; do
  ncu --clock-control none -k regex:cukernels_sgemm_${v}_nn --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section Occupancy \
    --metrics ${stalls}l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__sass_inst_executed_op_shared_ld.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,sm__cycles_elapsed.avg.per_second \
    $S/cukernels-bench sgemm --shape 4096x4096x4096 --reps 3 > "$OUT/ncu_$v.txt" 2>&1
  grep -E "stalled|inst_executed|wavefronts|Issue Slots|No Eligible|per_second|Duration" "$OUT/ncu_$v.txt"
done
