#!/usr/bin/env bash
# The 4-variant study's chain on the device (started by start-4v.sh as /tmp/study-chain-loop.sh in /tmp/study-src),
# with SUITE_STORE=/tmp/suite-store:
#   run 1: the fresh machine, the store empty: everything cold, every evaluation scored (in looks);
#   run 2: a CI run of new FP8 builds against an unchanged baseline: the store keeps its compile caches and the
#          baseline's evaluation; the variants' evaluation-cache entries and every checkpoint are moved away first,
#          so the builds are quantized, started and scored again, as a new build would be.
# After each run `suite gate RUN --no-record` (its output and exit code in /tmp/extra-out/gate-N.txt).
set -uo pipefail
S=studies/2026-12-07-verdict-in-minutes
R=$S/recipes/${RECIPE:-qwen0.5b-4variants-fast}.yaml
printf '#!/bin/sh\nPYTHONPATH=/tmp/envs/quantize:%s exec python3 "$@"\n' "$PWD" > /tmp/quantize-python
chmod +x /tmp/quantize-python
export PYTHONPATH=$PWD:/tmp/envs/serve HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 SUITE_STORE=/tmp/suite-store \
  SUITE_QUANTIZE_PYTHON=/tmp/quantize-python
log() { echo "$(date +%T) chain: $*" >> /tmp/study-chain.log; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
mkdir -p /tmp/extra-out
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > /tmp/extra-out/gpu.txt 2>&1
nproc > /tmp/extra-out/nproc.txt; lscpu > /tmp/extra-out/lscpu.txt 2>&1
for n in ${RUNS:-1 2}; do
  if [ "$n" = 2 ]; then
    base=$(python3 -c "import json,glob; print(json.load(open(glob.glob('/tmp/runs-1/2*/variants/bf16/evaluate.result.json')[0]))['cache_key'])" 2>/dev/null)
    mkdir -p /tmp/store-moved
    for d in /tmp/suite-store/eval-cache/*/; do [ "$(basename "$d")" = "$base" ] || mv "$d" /tmp/store-moved/; done
    rm -rf runs/checkpoints /tmp/runs-1/checkpoints
    log "run 2: kept the baseline's evaluation ($base) and the compile caches; moved $(ls /tmp/store-moved | wc -l) other evaluation(s) and every checkpoint away"
  fi
  log "run $n: start (compile store $(du -sh /tmp/suite-store/compile-cache 2>/dev/null | cut -f1))"
  t=$(date +%s.%N)
  python3 -m suite run "$R" --out "/tmp/runs-$n" > "/tmp/suite-run-$n.log" 2>&1
  log "run $n: rc $?, wall $(since "$t") s"
  run=$(ls -d /tmp/runs-$n/2*/ 2>/dev/null | tail -1)
  [ -n "$run" ] && { timeout 300 python3 -m suite gate "$run" --no-record > "/tmp/extra-out/gate-$n.txt" 2>&1; echo "exit $?" >> "/tmp/extra-out/gate-$n.txt"; }
  log "run $n: gate $(tail -1 /tmp/extra-out/gate-$n.txt 2>/dev/null)"
  du -sb /tmp/suite-store/compile-cache/* /tmp/suite-store/eval-cache/* > "/tmp/extra-out/store-after-run-$n.txt" 2>&1
done
log "done"
