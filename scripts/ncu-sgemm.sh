#!/usr/bin/env bash
# Profiles SGEMM at one shape with Nsight Compute (clocks left as they are): our kernels and the
# cuBLAS kernel of the same shape side by side (name, registers, block, shared memory, SM clock,
# instruction mix, issue-slot use, warp stall breakdown), plus a per-SASS-instruction stall
# profile of our kernels (CSV) to show where in the loop the warps wait. Logs under $OUT.
# Usage: bash scripts/ncu-sgemm.sh [shape [variant...]]   (default: 4096x4096x4096 huge)
S=${STAGE:-device-stage}
OUT=${OUT:-/tmp/cukernels-out}
shape=${1:-4096x4096x4096}; shift
[ $# -eq 0 ] && set -- huge
stalls=$(for r in barrier dispatch_stall long_scoreboard short_scoreboard math_pipe_throttle mio_throttle not_selected selected wait no_instruction lg_throttle branch_resolving drain misc; do printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' $r; done)
metrics="${stalls}l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,sm__sass_inst_executed_op_shared_ld.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,sm__cycles_elapsed.avg.per_second,launch__registers_per_thread,launch__block_size,launch__grid_size,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
summary() { grep -E "^  [a-z_0-9]+.*(sgemm|gemm|xmma|kernel)|stalled|inst_executed|wavefronts|per_second|launch__|issue_active|pipe_fma|Duration" "$1"; }
# cuBLAS: every kernel that is not ours (ECMAScript regex, negative lookahead).
ncu --clock-control none -k 'regex:^(?!cukernels)' --launch-skip 2 --launch-count 1 --metrics "$metrics" \
  $S/cukernels-bench sgemm --shape "$shape" --reps 3 > "$OUT/ncu_cublas.txt" 2>&1
echo "== cuBLAS at $shape"; summary "$OUT/ncu_cublas.txt"
for v in "$@"; do
  ncu --clock-control none -k "regex:cukernels_sgemm_${v}_nn" --launch-skip 5 --launch-count 1 --metrics "$metrics" \
    --section SourceCounters --section WarpStateStats -f -o "$OUT/ncu_$v" \
    $S/cukernels-bench sgemm --shape "$shape" --reps 3 > "$OUT/ncu_$v.txt" 2>&1
  ncu -i "$OUT/ncu_$v.ncu-rep" --page details --print-units base > "$OUT/ncu_$v.txt" 2>&1
  ncu -i "$OUT/ncu_$v.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${v}_sass.csv" 2>&1
  echo "== ours ($v) at $shape"; summary "$OUT/ncu_$v.txt"
done
