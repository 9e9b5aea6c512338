#!/usr/bin/env bash
# Wait up to SECONDS for the study's chain (chain.sh), then bring back what it made so far to $OUT (a run still going
# is packed as far as it got): results.tar.gz (each run folder whole, less checkpoint weights; the suite's run logs;
# the chain log; /tmp/extra-out) and gpu.txt.
#   bash studies/2026-12-07-verdict-in-minutes/device/wait.sh SECONDS
set -uo pipefail
limit=${1:-540} start=$(date +%s)
while pgrep -f "[s]tudy-chain-loop" >/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do sleep 5; done
cat /tmp/study-chain.log 2>/dev/null
for log in /tmp/suite-run-*.log; do
  [ -f "$log" ] || continue
  echo "== $log"; tr '\r' '\n' < "$log" | grep -E "^[0-9:]+ (benchmark|evaluate|track) " | tail -n 20; tail -n 6 "$log"
done
pgrep -f "[s]tudy-chain-loop" >/dev/null && echo "wait: the chain is still running after ${limit} s"
[ -n "${OUT:-}" ] || exit 0
# whole run folders (a partial pack cannot be gated elsewhere: `suite gate` needs every stage's config, run.json
# and the manifest), without checkpoints' weights
files=(/tmp/runs-*/2*/)
tar czf "$OUT/results.tar.gz" --ignore-failed-read --exclude="*.safetensors" --exclude="*.bin" "${files[@]}" /tmp/suite-run-*.log /tmp/study-chain.log \
  /tmp/install.log /tmp/compileall.log /tmp/extra-out 2>/dev/null
nvidia-smi --query-gpu=index,name,memory.used --format=csv > "$OUT/gpu.txt" 2>&1
ls -la "$OUT"
