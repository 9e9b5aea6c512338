#!/usr/bin/env bash
# Issue 15 on the project's H200 machine, after install.sh (as tools/h200/h200-chain.sh): the 4-variant recipe in one
# `suite run` on the fresh machine, then the evaluation-engine start experiment (studies/2026-12-01-four-variants-gpu-sharing/scripts/start_cost.py) with
# FlashInfer's and Triton's JIT caches emptied first, so that its first configuration starts as on a fresh machine.
# Its rows go to /tmp/extra-out/start-cost (brought back in logs.tar.gz by tools/h200/h200-wait.sh).
#   bash studies/2026-12-01-four-variants-gpu-sharing/scripts/h200-issue15.sh 400 [start-cost]   then   bash tools/h200/h200-wait.sh 540   until it ends
# (WAIT counts from this call's start, the model preparation included: give the device call ~60 s more than it)
# With "start-cost" only the experiment runs (about 10 minutes for its seven configurations).
#   bash studies/2026-12-01-four-variants-gpu-sharing/scripts/h200-issue15.sh 0 pre     (in the command that carries the install's last chunk): in the
#   background, once /tmp/envs/.complete exists, while the GGUF pieces are still being carried, the import time of
#   `vllm serve`'s modules (CPU only; the GPU is not touched), three times: the first import after the install
#   (Python writes the bytecode then: the bundle installs with --no-compile), then twice more, each with -X importtime
#   (to /tmp/extra-out/imports). Server starts spent ~45 s outside vLLM's own phases, 21 s of it before vllm serve's
#   first log line (2026-12-04, second session). The full mode waits for it to end.
# Issue each wait the moment the last one returns: a machine is taken back 30 s after a command ends (2026-12-04 lost
# one so).
set -uo pipefail
wait_s=$1 only=${2:-}
case "$only" in ""|start-cost|pre) ;; *) echo "h200-issue15: the second argument is start-cost, pre or nothing, not $only" >&2; exit 2;; esac
mkdir -p /tmp/extra-out/start-cost
touch /tmp/h200-chain.log
q=models/qwen2.5-coder-0.5b-instruct l=models/llama3-8b-shape
[ -f /tmp/l8b-model/config.json ] && l=/tmp/l8b-model  # the 8B shape carried once (h200.md)
if [ "$only" = pre ]; then
  if pgrep -f "[h]200-pre-loop" >/dev/null; then echo "h200-issue15 pre: one is still running" >&2; exit 2; fi
  mkdir -p /tmp/extra-out/imports
  cat > /tmp/h200-pre-loop.sh <<'LOOP'
deadline=$(( $(date +%s) + 600 ))
while [ ! -f /tmp/envs/.complete ]; do
  [ $(date +%s) -lt $deadline ] || { echo "$(date +%T) pre: no install after 600 s" >> /tmp/h200-chain.log; exit 2; }
  sleep 2
done
cd /tmp
for i in 1 2 3; do
  t0=$(date +%s%N)
  PYTHONPATH=/tmp/envs/serve python3 -X importtime -c \
    "import vllm.entrypoints.cli.main, vllm.entrypoints.openai.api_server, vllm.v1.engine.core" \
    2> /tmp/extra-out/imports/importtime-$i.txt
  rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$(date +%T) pre: import $i: rc $rc in $ms ms" >> /tmp/h200-chain.log
done
echo "$(date +%T) pre: done" >> /tmp/h200-chain.log
LOOP
  setsid nohup bash /tmp/h200-pre-loop.sh > /dev/null 2>&1 < /dev/null &
  echo "h200-issue15 pre: started (waits for /tmp/envs/.complete)"
  exit 0
fi
t_prep=$(date +%s)
bash tools/h200/h200-prepare.sh || exit 2
wait_s=$(( wait_s - ($(date +%s) - t_prep) ))  # WAIT counts from the call's start: the GGUF conversion (~70 s) is in it
[ "$wait_s" -gt 0 ] || wait_s=1
if pgrep -f "[h]200-chain-loop" >/dev/null; then echo "h200-issue15: a chain is still running" >&2; exit 2; fi
src=/tmp/suite-chain-src
rm -rf "$src" && cp -r . "$src"
run_study="bash tools/h200/h200-run.sh studies/2026-12-01-four-variants-gpu-sharing/recipes/qwen0.5b-4variants.yaml /tmp/runs-qwen0.5b-4variants"
configs="--config q05-default-nofi:$q:default:nofi --config q05-default-fi:$q:default:fi \
  --config l8b-default:$l:default:nofi --config l8b-eager:$l:eager:nofi \
  --config q05-eager:$q:eager:nofi --config q05-graphs:$q:graphs:nofi --config l8b-graphs:$l:graphs:nofi"
if [ "$only" = start-cost ]; then
  run_study=true
else  # after the study: the two rows not reached (the 0.5B's default start, the 8B shape with FlashInfer's sampler),
  # then the 0.5B's cheaper starts again on the same machine
  configs="--config q05-default-nofi:$q:default:nofi --config l8b-default-fi:$l:default:fi \
  --config q05-graphs:$q:graphs:nofi --config q05-eager:$q:eager:nofi"
fi
cat > /tmp/h200-chain-loop.sh <<LOOP
cd $src
while pgrep -f "[h]200-pre-loop" >/dev/null; do sleep 2; done
rm -rf ~/.cache/flashinfer ~/.triton  # whatever the pre experiment JIT-compiled: the study starts as on a fresh machine
echo "\$(date +%T) chain: 4-variant ($run_study)" >> /tmp/h200-chain.log
$run_study >> /tmp/h200-chain.log 2>&1 || exit 2
sleep 2
while pgrep -f "[p]ython3 -m suite run" >/dev/null; do sleep 5; done
echo "\$(date +%T) chain: start-cost (JIT caches emptied: \$(du -sh ~/.cache/flashinfer ~/.triton 2>/dev/null | tr '\n' ' '))" >> /tmp/h200-chain.log
rm -rf ~/.cache/flashinfer ~/.triton
PYTHONPATH=$src:/tmp/envs/serve HF_HUB_OFFLINE=1 python3 studies/2026-12-01-four-variants-gpu-sharing/scripts/start_cost.py --out /tmp/extra-out/start-cost \
  $configs >> /tmp/h200-chain.log 2>&1
echo "\$(date +%T) chain: done" >> /tmp/h200-chain.log
LOOP
setsid nohup bash /tmp/h200-chain-loop.sh > /dev/null 2>&1 < /dev/null &
sleep 5
bash tools/h200/h200-wait.sh "$wait_s"
