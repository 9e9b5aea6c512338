#!/usr/bin/env bash
# After chain.sh's runs, on the same machine: what vLLM's sleep mode saves against a fresh start (issue 45, item 3:
# swapping engines between variants without a cold start). One plain `vllm serve` of the study's BF16 engine with
# --enable-sleep-mode, its compile caches pointed at the suite store's folder for that configuration (warm, as the
# suite's second start was): the time to ready, a 64-token request, POST /sleep?level=1 (weights to CPU, KV cache
# dropped), the GPU memory asleep, POST /wake_up, the same request again. Lines to /tmp/extra-out/sleep.txt.
set -uo pipefail
out=/tmp/extra-out/sleep.txt
model=${1:-/tmp/study-src/models/llama3-8b-shape}
key=$(ls -d /tmp/suite-store/compile-cache/[0-9a-f]*/ 2>/dev/null | while read -r d; do [ -f "$d.complete" ] && echo "$d" && break; done)
[ -n "$key" ] || { echo "sleep: no complete compile-store folder" >> "$out"; exit 0; }
# the JIT caches are the store's shared folder (compile-cache/jit-<key>/), the compiled graphs the configuration's
jit=$(ls -d /tmp/suite-store/compile-cache/jit-*/ 2>/dev/null | head -1)
export VLLM_CACHE_ROOT=${key}vllm TORCHINDUCTOR_CACHE_DIR=${key}inductor TRITON_CACHE_DIR=${jit:-$key}triton \
  FLASHINFER_WORKSPACE_BASE=${jit:-$key}flashinfer VLLM_SERVER_DEV_MODE=1
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
say() { echo "$(date +%T) $*" | tee -a "$out"; }
say "key folder $key"
t=$(now)
python3 -m suite.runtime.engine.vllm_cli serve "$model" --load-format dummy --dtype bfloat16 --max-model-len 4096 --gpu-memory-utilization 0.9 \
  --enable-sleep-mode --port 8123 > /tmp/extra-out/sleep-server.log 2>&1 &
pid=$!
until curl -sf localhost:8123/health >/dev/null; do
  kill -0 $pid 2>/dev/null || { say "server died"; tail -20 /tmp/extra-out/sleep-server.log >> "$out"; exit 0; }
  [ "$(dt "$t" | cut -d. -f1)" -gt 420 ] && { say "not ready in 420 s"; kill $pid; exit 0; }
  sleep 0.5
done
say "ready after $(dt "$t") s (fresh start, compile store warm)"
ask() { local s; s=$(now); curl -sf localhost:8123/v1/completions -H 'Content-Type: application/json' \
  -d "{\"model\": \"$model\", \"prompt\": \"Hello\", \"max_tokens\": 64, \"ignore_eos\": true}" >/dev/null; \
  say "$1: a 64-token request took $(dt "$s") s (rc $?)"; }
mem() { say "$1: GPU memory used $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"; }
ask "awake"; mem "awake"
for round in 1 2; do
  s=$(now); curl -sf -X POST "localhost:8123/sleep?level=1" >/dev/null; say "round $round: sleep level 1 took $(dt "$s") s"
  mem "round $round asleep"
  s=$(now); curl -sf -X POST localhost:8123/wake_up >/dev/null; say "round $round: wake_up took $(dt "$s") s"
  ask "round $round woken"
done
grep -E "KV cache|Available KV|Maximum concurrency|init engine|Loading weights took|Memory profiling|torch.compile takes|Graph capturing" \
  /tmp/extra-out/sleep-server.log | tail -n 12 >> "$out"
kill $pid; wait $pid 2>/dev/null
say "done"
