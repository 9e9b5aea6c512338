#!/usr/bin/env bash
# On the device, in the command that carries models/llama3-8b-shape after every bundle and GGUF piece: wait for the
# install, prepare (tools/h200/h200-prepare.sh: byte-compile in the background, /tmp/shared/data, the GGUF converted to
# models/qwen2.5-coder-0.5b-instruct), then start the study's chain (chain.sh) in its own session from a copy of the
# tree, and wait like tools/h200/h200-wait.sh.
#   bash studies/2026-12-05-verdicts/device/start.sh WAIT_S [STEPS [PLAIN_REPS]]
# STEPS default "a b" (session 1); "c plain" for session 2 (PLAIN_REPS: repetitions of each plain point, default 3);
# "d" for the TRITON_ATTN follow-up (recipes/d-bf16-triton-bi.yaml, batch-invariance.md).
set -uo pipefail
wait_s=${1:-300}; steps=${2:-a b}; plain_reps=${3:-3}
t0=$(date +%s)
while [ ! -f /tmp/envs/.complete ] && [ $(( $(date +%s) - t0 )) -lt 300 ]; do sleep 3; done
[ -f /tmp/envs/.complete ] || { echo "start: the install has not finished in 300 s"; tail -5 /tmp/install.log; exit 2; }
echo "start: install done (waited $(( $(date +%s) - t0 )) s)"
bash tools/h200/h200-prepare.sh || exit 2
case " $steps " in *" a "*|*" a-seq "*|*" b "*|*" d "*) [ -f models/qwen2.5-coder-0.5b-instruct/.complete ] \
  || { echo "start: no Qwen model (GGUF pieces in /tmp/gguf?)"; exit 2; } ;; esac
case " $steps " in *" c "*|*" plain "*) [ -f models/llama3-8b-shape/config.json ] \
  || { echo "start: no models/llama3-8b-shape (carry it)"; exit 2; } ;; esac
if pgrep -f "[h]200-chain-loop" >/dev/null; then echo "start: a chain is running already"; else
  # the carried pieces are in /tmp/chunks and /tmp/gguf by now: keep them out of the tree copies (one per run)
  rm -rf .device .device-gguf .device-data
  src=/tmp/suite-chain-src; rm -rf "$src" && cp -r . "$src"
  echo "$PWD" > /tmp/repo-root  # where later device calls lay the tree anew (chain.sh takes suite/ from there for b)
  : > /tmp/h200-chain.log; mkdir -p /tmp/extra-out
  cp "$src/studies/2026-12-05-verdicts/device/chain.sh" /tmp/h200-chain-loop.sh
  (cd "$src" && STEPS="$steps" REPS="$plain_reps" setsid nohup bash /tmp/h200-chain-loop.sh > /tmp/extra-out/chain.out 2>&1 < /dev/null &)
  sleep 5
fi
bash tools/h200/h200-wait.sh "$wait_s"
