#!/usr/bin/env bash
# Part (c)'s reference: plain `vllm serve` + `vllm bench serve` on the points c-llama3-8b-shape.yaml measures, with the
# flags the suite's benchmark stage uses (suite/stages/benchmark/server.py serve_command, stage.py bench command):
# the same model folder and dummy weights, max_model_len 4096, gpu_memory_utilization 0.9, 4 API servers, random
# 512/256, --ignore-eos, 1,500 prompts, 32 warm-up requests, seeds 0 + 1009 k as the suite gives its runs. The server's
# /metrics is read every 0.5 s during each point for the largest vllm:num_requests_running (the measured peak).
# Results: /tmp/extra-out/plain/<variant>-rate<R>-r<k>.json (vllm bench serve --save-result), <variant>.serve.log
# (tail), <variant>-rate<R>-r<k>.running_max, times.txt (server start, each point).
#   VARIANTS="bf16 fp8-online" RATES="100 50" REPS=3 bash studies/2026-12-05-verdicts/device/plain-vllm.sh
set -uo pipefail
export PYTHONPATH=/tmp/envs/serve HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
model=$(pwd)/models/llama3-8b-shape
out=/tmp/extra-out/plain; mkdir -p "$out"
VLLM=(python3 -c 'import sys; from vllm.entrypoints.cli.main import main; sys.argv=["vllm"]+sys.argv[1:]; main()')
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' "$1" 2>/dev/null; }
port=18731
for variant in ${VARIANTS:-bf16 fp8-online}; do
  extra=(); [ "$variant" = fp8-online ] && extra=(--quantization fp8)
  t0=$(date +%s.%N)
  setsid "${VLLM[@]}" serve "$model" --host 127.0.0.1 --port $port --seed 0 --dtype bfloat16 --max-model-len 4096 \
    --kv-cache-dtype auto --load-format dummy --gpu-memory-utilization 0.9 --api-server-count 4 "${extra[@]}" \
    > "/tmp/plain-$variant.serve.log" 2>&1 < /dev/null &
  spid=$!
  until get "http://127.0.0.1:$port/health" >/dev/null; do
    sleep 1; kill -0 $spid 2>/dev/null || { echo "plain: $variant server died"; tail -20 "/tmp/plain-$variant.serve.log"; break; }
    [ $(( $(date +%s) - ${t0%.*} )) -gt 600 ] && { echo "plain: $variant not ready in 600 s"; break; }
  done
  echo "$variant server_ready_s $(since $t0)" >> "$out/times.txt"
  k=0
  for rate in ${RATES:-100 50}; do
    for rep in $(seq 0 $(( ${REPS:-3} - 1 ))); do
      name="$variant-rate$rate-r$rep"
      ( m=0; while sleep 0.5; do v=$(get "http://127.0.0.1:$port/metrics" | awk '/^vllm:num_requests_running/ {s+=$2} END {print s+0}');
          [ "${v%.*}" -gt "$m" ] 2>/dev/null && { m=${v%.*}; echo $m > "$out/$name.running_max"; }; done ) &
      mpid=$!
      p0=$(date +%s.%N)
      "${VLLM[@]}" bench serve --backend vllm --base-url "http://127.0.0.1:$port" --endpoint /v1/completions --model "$model" \
        --tokenizer "$model" --dataset-name random --random-input-len 512 --random-output-len 256 --num-prompts 1500 \
        --request-rate "$rate" --ignore-eos --seed $(( 1009 * k )) --num-warmups 32 \
        --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \
        --save-result --result-dir "$out" --result-filename "$name.json" --disable-tqdm > "/tmp/plain-$name.log" 2>&1
      echo "$name rc $? wall_s $(since $p0)" >> "$out/times.txt"
      kill $mpid 2>/dev/null; k=$((k + 1))
      grep -E "Output token throughput|Peak concurrent" "/tmp/plain-$name.log" | sed "s/^/$name: /"
    done
  done
  kill -- -$spid 2>/dev/null; sleep 8; kill -9 -- -$spid 2>/dev/null
  tail -c 200000 "/tmp/plain-$variant.serve.log" > "$out/$variant.serve.log"
  sleep 2
done
