#!/usr/bin/env bash
# Wait up to SECONDS for chain-4v.sh, then bring back what it made so far to $OUT (a run still going is packed as far
# as it got): results.tar.gz.NN (the run folders whole, less checkpoint weights; the suite's run logs; the chain
# log; /tmp/extra-out), in 15 MiB pieces (the device tool brings back 16 MiB a file, 8 files).
#   bash studies/2026-12-07-verdict-in-minutes/device/wait-4v.sh SECONDS
set -uo pipefail
limit=${1:-540} start=$(date +%s)
while pgrep -f "[s]tudy-chain-loop" >/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do sleep 5; done
cat /tmp/study-chain.log 2>/dev/null
for log in /tmp/suite-run-*.log; do
  [ -f "$log" ] || continue
  echo "== $log"; tr '\r' '\n' < "$log" | grep -E "^[0-9:]+ (quantize|evaluate|benchmark|publish) " | tail -n 24; tail -n 4 "$log"
done
pgrep -f "[s]tudy-chain-loop" >/dev/null && echo "wait: the chain is still running after ${limit} s"
[ -n "${OUT:-}" ] || exit 0
rm -rf /tmp/pack && mkdir -p /tmp/pack
tar czf /tmp/pack/results.tar.gz --ignore-failed-read --exclude="*.safetensors" --exclude="*.bin" /tmp/runs-*/2*/ \
  /tmp/suite-run-*.log /tmp/study-chain.log /tmp/install.log /tmp/compileall.log /tmp/convert.log /tmp/extra-out 2>/dev/null
(cd /tmp/pack && split -b 15M -d -a 2 results.tar.gz results.tar.gz. && rm results.tar.gz && sha256sum results.tar.gz.* > SHA256SUMS)
ls /tmp/pack/results.tar.gz.* | head -6 | xargs -I{} cp {} "$OUT/"; cp /tmp/pack/SHA256SUMS "$OUT/"
ls -la "$OUT"
