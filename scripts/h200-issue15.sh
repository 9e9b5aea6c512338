#!/usr/bin/env bash
# Issue 15 on the project's H200 machine, after install.sh (as scripts/h200-chain.sh): the 4-variant recipe in one
# `suite run` on the fresh machine, then the evaluation-engine start experiment (scripts/start_cost.py) with
# FlashInfer's and Triton's JIT caches emptied first, so that its first configuration starts as on a fresh machine.
# Its rows go to /tmp/extra-out/start-cost (brought back in logs.tar.gz by scripts/h200-wait.sh).
#   bash scripts/h200-issue15.sh 400 [start-cost]   then   bash scripts/h200-wait.sh 540   until it ends
# With "start-cost" only the experiment runs (about 10 minutes for its seven configurations). Issue each wait the
# moment the last one returns: a machine is taken back 30 s after a command ends (2026-12-04 lost one so).
set -uo pipefail
wait_s=$1 only=${2:-}
case "$only" in ""|start-cost) ;; *) echo "h200-issue15: the second argument is start-cost or nothing, not $only" >&2; exit 2;; esac
bash scripts/h200-prepare.sh || exit 2
if pgrep -f "[h]200-chain-loop" >/dev/null; then echo "h200-issue15: a chain is still running" >&2; exit 2; fi
src=/tmp/suite-chain-src
rm -rf "$src" && cp -r . "$src"
: > /tmp/h200-chain.log
mkdir -p /tmp/extra-out/start-cost
q=models/qwen2.5-coder-0.5b-instruct l=models/llama3-8b-shape
run_study="bash scripts/h200-run.sh recipes/qwen0.5b-4variants.yaml /tmp/runs-qwen0.5b-4variants"
[ "$only" = start-cost ] && run_study=true
cat > /tmp/h200-chain-loop.sh <<LOOP
cd $src
echo "\$(date +%T) chain: 4-variant ($run_study)" >> /tmp/h200-chain.log
$run_study >> /tmp/h200-chain.log 2>&1 || exit 2
sleep 2
while pgrep -f "[p]ython3 -m suite run" >/dev/null; do sleep 5; done
echo "\$(date +%T) chain: start-cost (JIT caches emptied: \$(du -sh ~/.cache/flashinfer ~/.triton 2>/dev/null | tr '\n' ' '))" >> /tmp/h200-chain.log
rm -rf ~/.cache/flashinfer ~/.triton
PYTHONPATH=$src:/tmp/envs/serve HF_HUB_OFFLINE=1 python3 scripts/start_cost.py --out /tmp/extra-out/start-cost \
  --config q05-default-nofi:$q:default:nofi --config q05-default-fi:$q:default:fi \
  --config l8b-default:$l:default:nofi --config l8b-eager:$l:eager:nofi \
  --config q05-eager:$q:eager:nofi --config q05-graphs:$q:graphs:nofi --config l8b-graphs:$l:graphs:nofi \
  >> /tmp/h200-chain.log 2>&1
echo "\$(date +%T) chain: done" >> /tmp/h200-chain.log
LOOP
setsid nohup bash /tmp/h200-chain-loop.sh > /dev/null 2>&1 < /dev/null &
sleep 5
bash scripts/h200-wait.sh "$wait_s"
