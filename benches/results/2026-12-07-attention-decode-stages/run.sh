#!/usr/bin/env bash
# Stop 56: sm_90 decode tiles changed by stages.patch (first call) or warps.patch (second call),
# each against main (README.md), both sm_90-only benches (`CUKERNELS_ARCHS=sm_90 cargo build --release -p
# cukernels-bench`) in device-stage-c, timed by scripts/device-ab.sh (alternating, 2 rounds):
# every one-sequence decode row (the split rule's and the forced split sweep) and batch 16 at
# 32k keys.
printf '%s\n' "decode b1 q1 " "decode b16 q1 k32768 h32/8 d128 f16" > /tmp/decode-shapes.txt
AB_OP=attention AB_STAGE=device-stage-c AB_TIMEOUT=150 bash scripts/device-ab.sh /tmp/decode-shapes.txt
