#!/usr/bin/env bash
# Run on the GPU machine from the repository root, with device-stage-b/{base,pdl,impl}/cukernels-bench
# staged (sm_90 builds): base = main (60037fb kernels), pdl = branch pdl-land (778c33a), impl =
# branch pdl-implicit (ef73dab; the kernels of this commit).
# Trigger placement: base (main) vs pdl (early triggers) vs impl (implicit triggers at exit in
# kernels whose dependent is unknown). Two rounds. Tables in $OUT/impl.txt.
S=device-stage-b
att=(--shape "decode b16 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k16384 h32/8 d128 f16 splits 16" --shape "decode b1 q1 k8192 h32/8 d128 f16 splits 33")
moe=(--shape "dense q4_0 T128 E1/1 4096x4096 (tall forced)" --shape "dense q4_0 T512 E1/1 4096x4096" --shape "qwen3-30b-a3b q4_0 T1 E128/8 768x2048" --shape "qwen3-30b-a3b q4_0 T8 E128/8 768x2048" --shape "qwen3-30b-a3b q4_0 T2048 E128/8 768x2048")
sg=(--shape "7966x207x140:nt" --shape "512x512x512" --shape "33x4097x129" --shape "59x(488x19x34):tt@col" --shape "376x(2080x3x1):nt@col" --shape "1x4096x4096" --shape "256x256x256")
end=$(( $(date +%s) + 105 ))
for round in 1 2; do for side in base pdl impl; do
  [ $(date +%s) -lt $end ] || break 2
  B=$S/$side/cukernels-bench
  timeout 25 $B attention --config sm_90 --reps 7 "${att[@]}" --out $OUT/att-$side.jsonl > /dev/null 2>&1 || echo "att $side $round failed"
  timeout 15 $B moe --reps 9 "${moe[@]}" --out $OUT/moe-$side.jsonl > /dev/null 2>&1 || echo "moe $side $round failed"
  timeout 20 $B sgemm --reps 9 "${sg[@]}" --out $OUT/sg-$side.jsonl > /dev/null 2>&1 || echo "sgemm $side $round failed"
done; done
python3 - <<'PY' > $OUT/impl.txt
import json,os,statistics as st
out=os.environ['OUT']
for fam in ('att','moe','sg'):
    d={}
    for side in ('base','pdl','impl'):
        try: lines=open(f"{out}/{fam}-{side}.jsonl")
        except OSError: continue
        for l in lines:
            r=json.loads(l); lab=r.get('label') or r.get('shape'); d.setdefault(lab,{}).setdefault(side,[]).append(r['ours_ms']*1000)
    print(f"\n{fam}: us, mean of the rounds' medians; base / pdl / impl")
    for k,v in d.items():
        m=lambda s: st.mean(v[s]) if s in v else float('nan')
        print(f"{k:60s} {m('base'):9.1f} {m('pdl'):9.1f} {m('impl'):9.1f}   pdl {m('base')/m('pdl'):.3f}  impl {m('base')/m('impl'):.3f}")
PY
cat $OUT/impl.txt
cd $OUT && tar czf impl-logs.tgz --remove-files *.jsonl
