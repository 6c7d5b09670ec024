#!/usr/bin/env bash
# Device call 3: the attention benchmark against PyTorch's SDPA (flash and cuDNN backends), with
# main's sm_90 bench (its attention kernels are this commit's, byte for byte).
S=device-stage-b
echo "commit $(cat $S/base/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >> $OUT/summary.txt
start=$(date +%s)
timeout 300 $S/base/cukernels-bench attention --reps 21 --out $OUT/attention-ours.jsonl > $OUT/attention.log 2>&1; echo "attention: exit $? at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
timeout 240 python3 benches/attention_torch.py $OUT/attention-ours.jsonl $OUT/attention.jsonl --samples 21 >> $OUT/attention.log 2>&1; echo "attention torch: exit $? at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
cd $OUT && tar czf logs-attention.tgz --remove-files *.log
