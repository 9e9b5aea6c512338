#!/usr/bin/env bash
# A/B of the CPU demo in one clone: af83365 (Inductor per configuration) vs cbd4a26 (Inductor in the shared JIT folder)
cd "${1:?a fresh clone of main after scripts/setup.sh}"
for rev in af83365 cbd4a26 af83365 cbd4a26; do
  git checkout -q $rev && rm -rf runs
  s=$(date +%s.%N); .venv/bin/suite run recipes/demo-cpu.yaml > /tmp/ab-$rev-$(date +%H%M%S).log 2>&1; rc=$?
  w=$(python3 -c "import time;print(round(time.time()-$s,1))")
  run=$(ls -d runs/2*/ | head -1)
  ev=$(python3 -c "import json;s=json.load(open('$run/summary.json'));print({k:round(v,1) for k,v in s['stage_wall_s'].items()})")
  fp8=$(grep -A12 'the call paths that took' $run/variants/fp8-kv/evaluate.log | grep -E 'cpp_builder|_inductor' | awk '{s+=$1} END {print s+0}')
  echo "$(date +%T) $rev rc $rc wall $w s stages $ev fp8-kv inductor-compile-paths ${fp8}s load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/ab.txt
done
git checkout -q main 2>/dev/null || git checkout -q cbd4a26
echo done >> /tmp/ab.txt
