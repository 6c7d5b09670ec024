# Stop 58: the f16 tiles with the raw-block ring (branch moe-f16-ring, or moe-f16-ring-narrow;
# sm_90 builds) against main's int8 tiles: the A/B of the T = 512 and 2048 rows first, then the
# branch's gpu_moe quick, then ncu. The argument names the stage folder (default device-stage-c,
# the ring; device-stage-d holds the narrow variant): cukernels-bench-base, cukernels-bench-new,
# gpu_moe.
S=${1:-device-stage-c}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
printf '%s\n' "T512 E" "T2048 E" > /tmp/shapes.txt
AB_OP=moe AB_ARGS="--reps 11" AB_STAGE=$S AB_TIMEOUT=60 bash scripts/device-ab.sh /tmp/shapes.txt > /dev/null 2>&1
cat $OUT/ab-summary.txt
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 110 $S/gpu_moe --ignored --test-threads=1 > $OUT/gpu_moe-quick.log 2>&1
echo "gpu_moe quick exit $? in $(( $(date +%s) - t )) s" >> $OUT/summary.txt
grep -hE "^test |panicked|FAILED|Error" -A3 $OUT/gpu_moe-quick.log | head -30 >> $OUT/summary.txt
cat $OUT/summary.txt
mkdir -p /tmp/nb && cp $S/cukernels-bench-new /tmp/nb/cukernels-bench
STAGE=/tmp/nb KERNEL=tall timeout 100 bash scripts/ncu-family.sh moe "qwen3-30b-a3b q4_0 T2048 " "qwen3-30b-a3b q6_K T2048 " > $OUT/ncu-summary.txt 2>&1
rm -f $OUT/*.ncu-rep
cat $OUT/ncu-summary.txt
