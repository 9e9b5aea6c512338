#!/usr/bin/env bash
# Wait up to SECONDS for the background `suite run` (scripts/h200-run.sh), then copy what it made to $OUT.
set -uo pipefail
limit=${1:-540}
start=$(date +%s)
while pgrep -f "python3 -m suite run" >/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do
  sleep 5
done
grep -E "quantize|evaluate|benchmark|track" /tmp/suite-run.log | tr '\r' '\n' | grep -E " ok| FAILED|skipped" | sort -u
tail -n 40 /tmp/suite-run.log
if ! pgrep -f "python3 -m suite run" >/dev/null && [ -n "${OUT:-}" ]; then
  run=$(ls -d /tmp/runs/2*/ 2>/dev/null | tail -1)
  [ -n "$run" ] && tar czf "$OUT/run.tar.gz" -C "$(dirname "$run")" "$(basename "$run")"
  cp /tmp/suite-run.log "$OUT/"
  nvidia-smi --query-gpu=name,memory.used --format=csv > "$OUT/gpu.txt"
else
  echo "still running after ${limit}s"
fi
