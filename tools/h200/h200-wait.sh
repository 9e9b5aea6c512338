#!/usr/bin/env bash
# Wait up to SECONDS for the background `suite run`s (tools/h200/h200-run.sh), then copy what they made to
# $OUT: one archive per output folder /tmp/runs*/ (split into 15 MiB pieces), and the logs. A run still
# going is archived as far as it got, so that a session whose device time runs out keeps what finished.
#   bash tools/h200/h200-wait.sh SECONDS     wait, pack anew, bring back what fits
#   bash tools/h200/h200-wait.sh rest        no wait, no new pack: the pieces of the last pack not yet brought back
# A command brings back at most 8 files and ~64 MiB (the device tool), so the pieces go to $OUT in order up to
# PACK_BUDGET_MIB (56) and 5 files, beside pack.SHA256SUMS, logs.tar.gz and gpu.txt; the others are listed in /tmp/pack/PENDING and
# sent by `rest` -- from the same pack: a second pack of the same folder need not split into the same bytes
# (stretch 5 of the study: an 84-MiB archive, its last two pieces not brought back). /tmp/pack/SHA256SUMS lists every
# piece of the pack, so that the joined archive is checked where it lands.
set -uo pipefail
budget_kib=$(( ${PACK_BUDGET_MIB:-56} * 1024 )) max_files=5
send() {  # copy the pieces named in /tmp/pack/PENDING to $OUT up to the budget; keep the rest pending
  [ -f /tmp/pack/PENDING ] || return 0
  local used=0 n=0 left=() f kib
  while read -r f; do
    [ -n "$f" ] || continue
    kib=$(( ($(stat -c %s "/tmp/pack/$f") + 1023) / 1024 ))
    if [ ${#left[@]} -eq 0 ] && [ $(( used + kib )) -le "$budget_kib" ] && [ "$n" -lt "$max_files" ] \
       && cp "/tmp/pack/$f" "$OUT/"; then
      used=$(( used + kib )) n=$(( n + 1 ))
    else  # over the budget, or the copy failed: it stays pending
      left+=("$f")
    fi
  done < /tmp/pack/PENDING
  printf '%s\n' "${left[@]+"${left[@]}"}" | sed '/^$/d' > /tmp/pack/PENDING
  cp /tmp/pack/SHA256SUMS "$OUT/pack.SHA256SUMS"
  if [ -s /tmp/pack/PENDING ]; then
    echo "h200-wait: $(wc -l < /tmp/pack/PENDING) piece(s) not brought back yet: run 'bash tools/h200/h200-wait.sh rest' next"
    cat /tmp/pack/PENDING
  fi
}
if [ "${1:-}" = rest ]; then
  [ -n "${OUT:-}" ] || { echo "h200-wait rest: no \$OUT" >&2; exit 2; }
  [ -f /tmp/pack/PENDING ] || { echo "h200-wait rest: no pack in /tmp/pack (a fresh machine? run h200-wait.sh SECONDS)" >&2; exit 2; }
  send; ls -la "$OUT"; exit 0
fi
limit=${1:-540}
start=$(date +%s)
running() { pgrep -f "[p]ython3 -m suite run" >/dev/null || pgrep -f "[h]200-chain-loop" >/dev/null \
  || pgrep -f "[h]200-pre-loop" >/dev/null; }
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
rm -rf /tmp/pack && mkdir -p /tmp/pack
for out in /tmp/runs*/; do
  tag=$(basename "$out")
  run=$(ls -d "$out"2*/ 2>/dev/null | tail -1)
  [ -n "$run" ] || continue
  # the run folder and the run's MLflow store beside it (what `suite run --resume` continues: tools/h200/h200-run.sh),
  # lm-eval's samples without their prompt texts (tools/pack_run.py: 5-shot MMLU's would not fit)
  python3 tools/pack_run.py "$out" "$(basename "$run")" | split -b 15M - "/tmp/pack/$tag.tar.gz.part-"
done
( cd /tmp/pack && ls | grep '\.part-' > PENDING; : > SHA256SUMS
  if [ -s PENDING ]; then sha256sum $(cat PENDING) > SHA256SUMS; fi ) 2>/dev/null
# /tmp/extra-out: what a script ran beside the runs (studies/2026-12-02-qwen-coder-study/scripts/h200-study-stretch.sh's noise floor); first, so that the
# pieces' budget is what is left beside it
tar czf "$OUT/logs.tar.gz" /tmp/suite-run-*.log /tmp/install.log /tmp/compileall.log /tmp/h200-chain.log /tmp/runs*/2*/jobs.json /tmp/extra-out 2>/dev/null
budget_kib=$(( budget_kib - $(du -k "$OUT/logs.tar.gz" 2>/dev/null | cut -f1 || echo 0) ))
send
nvidia-smi --query-gpu=index,name,memory.used --format=csv > "$OUT/gpu.txt"
ls -la "$OUT"
