#!/usr/bin/env bash
# The 4-variant study (recipes/qwen0.5b-4variants-fast.yaml) on the device, in the command that carries the last
# GGUF piece with .gpu-src (this checkout's suite/ and study folder): wait for the install (install-bg.sh, started
# by an earlier call), join and convert the GGUF (tools/h200/h200-models.sh into /tmp/models), lay out
# /tmp/study-src (the tree, .gpu-src's suite/ and study over it, models/ and /tmp/shared/data), start chain-4v.sh
# in its own session, then wait like wait-4v.sh.
#   bash .gpu-src/studies/2026-12-07-verdict-in-minutes/device/start-4v.sh WAIT_S
set -uo pipefail
wait_s=${1:-400}
t0=$(date +%s)
while [ ! -f /tmp/envs/.complete ] && [ $(( $(date +%s) - t0 )) -lt 300 ]; do sleep 3; done
[ -f /tmp/envs/.complete ] || { echo "start-4v: the install has not finished in 300 s"; tail -5 /tmp/install.log; exit 2; }
echo "start-4v: install done (waited $(( $(date +%s) - t0 )) s)"; tail -n 2 /tmp/install.log
src=/tmp/study-src S=studies/2026-12-07-verdict-in-minutes
if pgrep -f "[s]tudy-chain-loop" >/dev/null; then echo "start-4v: the chain is running already"; else
  # byte-compile the bundle's wheels (installed without bytecode) at low priority beside the conversion
  [ -f /tmp/envs/.compiled ] || (setsid nohup sh -c 's=$(date +%s); nice -n 10 python3 -m compileall -q -j 0 \
    /tmp/envs/serve /tmp/envs/quantize >/dev/null 2>&1; echo "compileall: rc $?, $(( $(date +%s) - s )) s" \
    > /tmp/compileall.log; touch /tmp/envs/.compiled' </dev/null >/dev/null 2>&1 &)
  mkdir -p /tmp/shared && rm -rf /tmp/shared/data && cp -r /tmp/device-data /tmp/shared/data
  (cd /tmp/shared/data && sha256sum --quiet -c SHA256SUMS 2>&1 | head -3)
  rm -rf "$src" && mkdir -p "$src"
  tar --exclude=./.device2 --exclude=./.gpu-src --exclude=./.device-gguf --exclude=./.device-data -cf - . | tar -xf - -C "$src"
  rm -rf "$src/suite" && cp -r .gpu-src/suite "$src/suite"
  mkdir -p "$src/studies" /tmp/models && cp -r .gpu-src/studies/2026-12-07-verdict-in-minutes "$src/studies/"
  s=$(date +%s)
  (cd "$src" && mkdir -p models && for dir in /tmp/gguf/*/; do name=$(basename "$dir")
     [ -f "/tmp/models/$name/.complete" ] && continue
     cat "$dir"part.* > "/tmp/$name.gguf"
     PYTHONPATH=/tmp/envs/quantize:$src python3 -m tools.models convert-gguf --gguf "/tmp/$name.gguf" --out "/tmp/models/$name" \
       > /tmp/convert.log 2>&1 || { echo "start-4v: conversion failed"; tail -5 /tmp/convert.log; exit 2; }
   done) || exit 2
  ln -sfn /tmp/models/qwen2.5-coder-0.5b-instruct "$src/models/qwen2.5-coder-0.5b-instruct"
  echo "start-4v: model ready in $(( $(date +%s) - s )) s ($(du -sh /tmp/models/qwen2.5-coder-0.5b-instruct | cut -f1))"
  : > /tmp/study-chain.log; mkdir -p /tmp/extra-out
  cp "$src/$S/device/chain-4v.sh" /tmp/study-chain-loop.sh
  (cd "$src" && setsid nohup bash /tmp/study-chain-loop.sh > /tmp/extra-out/chain.out 2>&1 < /dev/null &)
  sleep 3
fi
bash "$src/$S/device/wait-4v.sh" "$(( wait_s - ($(date +%s) - t0) ))"
