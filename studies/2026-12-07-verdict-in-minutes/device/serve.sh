#!/usr/bin/env bash
# One plain vllm serve start of the 8B shape (dummy weights, enforce-eager: no compile, no CUDA graphs), timed to
# ready: MODE A (no bytecode, the image's state) or B (PYTHONPYCACHEPREFIX=/tmp/pyc).
set -uo pipefail
mode=$1; export PYTHONPATH=/tmp/envs/serve VLLM_USE_FLASHINFER_SAMPLER=0
[ "$mode" = B ] && export PYTHONPYCACHEPREFIX=/tmp/pyc
mkdir -p /tmp/m && [ -d /tmp/m/llama3-8b-shape ] || tar -xzf .gpu-probe/model.tgz -C /tmp/m
log=/tmp/serve-$mode-$(date +%s).log; s=$(date +%s.%N)
python3 -m vllm.entrypoints.cli.main serve /tmp/m/llama3-8b-shape --load-format dummy --enforce-eager \
  --max-model-len 2048 --gpu-memory-utilization 0.5 --port 8011 > $log 2>&1 &
pid=$!
ready=""
for i in $(seq 1 600); do
  curl -sf localhost:8011/health >/dev/null 2>&1 && { ready=$(awk -v a=$s -v b=$(date +%s.%N) 'BEGIN{printf "%.1f", b-a}'); break; }
  kill -0 $pid 2>/dev/null || break; sleep 0.25
done
first=$(head -1 $log | cut -c1-60)
echo "$mode: ready ${ready:-never} s; log lines $(wc -l < $log); first: $first"
grep -m1 -n "EngineCore" $log | cut -c1-120; grep -m1 "init engine" $log | cut -c1-160
kill $pid 2>/dev/null; pkill -f "vllm.entrypoints" 2>/dev/null; sleep 3; pkill -9 -f "vllm.entrypoints" 2>/dev/null; sleep 1
