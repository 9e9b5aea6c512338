#!/usr/bin/env bash
# The study's chain on the device, started by start.sh as /tmp/study-chain-loop.sh from a copy of the tree
# (/tmp/study-src): the recipe run with a store (SUITE_STORE=/tmp/suite-store), RUNS times (default "1"; "1 2" runs
# it again after removing the machine's own vLLM / Inductor / Triton / FlashInfer caches, so that only the store can
# make run 2 warm, as on a CI runner that restores the store). Each run's wall time and the store's size after it go
# to /tmp/extra-out and /tmp/study-chain.log.
set -uo pipefail
S=studies/2026-12-07-verdict-in-minutes
R=$S/recipes/${RECIPE:-llama3-8b-shape-starts}.yaml
printf '#!/bin/sh\nPYTHONPATH=/tmp/envs/quantize:%s exec python3 "$@"\n' "$PWD" > /tmp/quantize-python
chmod +x /tmp/quantize-python
export PYTHONPATH=$PWD:/tmp/envs/serve HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 SUITE_STORE=/tmp/suite-store \
  SUITE_QUANTIZE_PYTHON=/tmp/quantize-python
log() { echo "$(date +%T) chain: $*" >> /tmp/study-chain.log; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }
mkdir -p /tmp/extra-out
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > /tmp/extra-out/gpu.txt 2>&1
for n in ${RUNS:-1}; do
  if [ "$n" = 2 ]; then
    rm -rf ~/.cache/vllm ~/.cache/flashinfer ~/.triton /tmp/torchinductor_*
    log "run 2: the machine's own vLLM, Inductor, Triton and FlashInfer caches removed: only the store is warm"
  fi
  log "run $n: start (compile store $(du -sh /tmp/suite-store/compile-cache 2>/dev/null | cut -f1))"
  t=$(date +%s.%N)
  python3 -m suite run "$R" --out "/tmp/runs-$n" > "/tmp/suite-run-$n.log" 2>&1
  log "run $n: rc $?, wall $(since "$t") s"
  du -sb /tmp/suite-store/compile-cache/* > "/tmp/extra-out/store-after-run-$n.txt" 2>&1
done
[ "${SLEEP:-0}" = 1 ] && { log "sleep mode: start"; bash "$S/device/sleep.sh"; log "sleep mode: done"; }
find /tmp/suite-store -maxdepth 4 > /tmp/extra-out/store-tree.txt 2>&1
du -sh /tmp/suite-store/compile-cache/*/* >> /tmp/extra-out/store-tree.txt 2>&1
log "done"
