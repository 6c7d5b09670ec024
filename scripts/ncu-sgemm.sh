#!/usr/bin/env bash
# Profiles the huge and large SGEMM kernels at 4096^3 with Nsight Compute (clocks untouched).
S=device-stage
for v in huge large; do
ncu --clock-control none -k regex:cukernels_sgemm_$v --launch-skip 5 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section InstructionStats \
  --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__sass_inst_executed_op_shared_ld.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed_pipe_alu.sum \
  $S/cukernels-bench sgemm --shape 4096x4096x4096 --reps 3 > $OUT/ncu_$v.txt 2>&1
done
tail -5 $OUT/ncu_huge.txt
