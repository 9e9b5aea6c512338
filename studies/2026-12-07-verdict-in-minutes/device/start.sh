#!/usr/bin/env bash
# On the device, in the command that carries .gpu-src (this branch's suite/, the study folder, the model folder as
# model.tgz) after the bundle's install was started (install-bg.sh of studies/2026-12-05-verdicts): wait for the install,
# lay out /tmp/study-src (the lead's tree with this branch's suite/ and study over it, models/llama3-8b-shape),
# byte-compile the environments, start chain.sh in its own session, then wait like wait.sh.
#   bash .gpu-src/studies/2026-12-07-verdict-in-minutes/device/start.sh WAIT_S
set -uo pipefail
wait_s=${1:-500}
t0=$(date +%s)
while [ ! -f /tmp/envs/.complete ] && [ $(( $(date +%s) - t0 )) -lt 300 ]; do sleep 3; done
[ -f /tmp/envs/.complete ] || { echo "start: the install has not finished in 300 s"; tail -5 /tmp/install.log; exit 2; }
# wheels the bundle lacks (.gpu-src/whl, e.g. tenacity, added to the serve extras after the bundle was cut):
# pure-Python ones, unpacked into the serve environment
for w in .gpu-src/whl/*.whl; do [ -f "$w" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/envs/serve')" "$w" && echo "start: unpacked $w"; done
echo "start: install done (waited $(( $(date +%s) - t0 )) s)"; tail -n 3 /tmp/install.log
src=/tmp/study-src
if pgrep -f "[s]tudy-chain-loop" >/dev/null; then echo "start: the chain is running already"; else
  rm -rf "$src" && mkdir -p "$src"
  tar --exclude=./.device --exclude=./.gpu-src -cf - . | tar -xf - -C "$src"
  rm -rf "$src/suite" && cp -r .gpu-src/suite "$src/suite"
  mkdir -p "$src/studies" "$src/models" && cp -r .gpu-src/studies/2026-12-07-verdict-in-minutes "$src/studies/"
  tar xzf .gpu-src/model.tgz -C "$src/models"
  # the bundle's wheels come without bytecode: compile them once, as tools/h200/h200-prepare.sh does
  [ -f /tmp/envs/.compiled ] || { s=$(date +%s); python3 -m compileall -q -j 0 /tmp/envs/serve >/dev/null 2>&1
    echo "compileall: rc $?, $(( $(date +%s) - s )) s" > /tmp/compileall.log; touch /tmp/envs/.compiled; }
  : > /tmp/study-chain.log; mkdir -p /tmp/extra-out
  cp "$src/studies/2026-12-07-verdict-in-minutes/device/chain.sh" /tmp/study-chain-loop.sh
  (cd "$src" && setsid nohup bash /tmp/study-chain-loop.sh > /tmp/extra-out/chain.out 2>&1 < /dev/null &)
  sleep 3
fi
bash "$src/studies/2026-12-07-verdict-in-minutes/device/wait.sh" "$wait_s"
