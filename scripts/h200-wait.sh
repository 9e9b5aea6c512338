#!/usr/bin/env bash
# Wait up to SECONDS for the background `suite run`s (scripts/h200-run.sh), then copy what they made to
# $OUT: one archive per output folder /tmp/runs*/ (split into 15 MiB pieces), and the logs. A run still
# going is archived as far as it got, so that a session whose device time runs out keeps what finished.
set -uo pipefail
limit=${1:-540}
start=$(date +%s)
running() { pgrep -f "[p]ython3 -m suite run" >/dev/null || pgrep -f "[h]200-chain-loop" >/dev/null; }
while running && [ $(( $(date +%s) - start )) -lt "$limit" ]; do
  sleep 5
done
[ -f /tmp/h200-chain.log ] && cat /tmp/h200-chain.log
for log in /tmp/suite-run-*.log; do
  echo "== $log"
  tr '\r' '\n' < "$log" | grep -E "^[0-9:]+ (quantize|kvcheck|evaluate|benchmark|track) +[^ ]+ (start|ok|failed|cached|skipped)( on .*)?$"
  tail -n 15 "$log"
done
running && echo "still running after ${limit}s"
[ -n "${OUT:-}" ] || exit 0
for out in /tmp/runs*/; do
  tag=$(basename "$out")
  run=$(ls -d "$out"2*/ 2>/dev/null | tail -1)
  [ -n "$run" ] || continue
  # the run folder and the run's MLflow store beside it (what `suite run --resume` continues: scripts/h200-run.sh),
  # lm-eval's samples without their prompt texts (scripts/pack_run.py: 5-shot MMLU's would not fit)
  python3 scripts/pack_run.py "$out" "$(basename "$run")" | split -b 15M - "$OUT/$tag.tar.gz.part-"
done
# /tmp/extra-out: what a script ran beside the runs (scripts/h200-study-stretch.sh's noise floor)
tar czf "$OUT/logs.tar.gz" /tmp/suite-run-*.log /tmp/install.log /tmp/runs*/2*/jobs.json /tmp/extra-out 2>/dev/null
nvidia-smi --query-gpu=index,name,memory.used --format=csv > "$OUT/gpu.txt"
ls -la "$OUT"
