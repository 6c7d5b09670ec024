# Stop 59: the f16 tall tile on warpgroup MMA (branch moe-wgmma, sm_90 builds) against main's
# tiles. The stage folder is the argument (default device-stage-g). It holds:
# - cukernels-bench-base: main, sm_90;
# - cukernels-bench-new: the branch, wgmma for the six formats of f16_tall_pays;
# - all/cukernels-bench-base: main again;
# - all/cukernels-bench-new and all/gpu_moe: the branch with wgmma-all-formats.patch (every
#   format's tall tile on wgmma).
# Order: gpu_moe first (every format's wgmma tile against its f16 reference, sm_90 config), then
# the A/B of the T = 512 and 2048 rows for both builds, then ncu of two tall kernels.
S=${1:-device-stage-g}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
t=$(date +%s); timeout 150 $S/all/gpu_moe --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (sm_90 config, wgmma on every format) exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" >> $OUT/summary.txt
grep -hE "^test |panicked|FAILED" -A3 $OUT/gpu_moe.log | head -30 >> $OUT/summary.txt
cat $OUT/summary.txt
printf '%s\n' "T512 E" "T2048 E" > /tmp/shapes.txt
mkdir -p $OUT/six $OUT/all
OUT=$OUT/six AB_OP=moe AB_ARGS="--reps 11" AB_STAGE=$S AB_TIMEOUT=60 bash scripts/device-ab.sh /tmp/shapes.txt > /dev/null 2>&1
echo "== wgmma for the six formats"; cat $OUT/six/ab-summary.txt
OUT=$OUT/all AB_OP=moe AB_ARGS="--reps 11" AB_STAGE=$S/all AB_TIMEOUT=60 bash scripts/device-ab.sh /tmp/shapes.txt > /dev/null 2>&1
echo "== wgmma for every format"; cat $OUT/all/ab-summary.txt
rm -f $OUT/*/ab.log
mkdir -p /tmp/nb && cp $S/all/cukernels-bench-new /tmp/nb/cukernels-bench
STAGE=/tmp/nb KERNEL=tall timeout 100 bash scripts/ncu-family.sh moe "qwen3-30b-a3b q4_0 T2048 " "qwen3-30b-a3b q6_K T2048 " > $OUT/ncu-summary.txt 2>&1
rm -f $OUT/*.ncu-rep
cat $OUT/ncu-summary.txt
