#!/usr/bin/env bash
# Run RECIPEs one after another on the project's H200 machine (each `suite run` has every GPU to itself), in the
# background, after install.sh (as studies/2026-12-02-qwen-coder-study/scripts/h200-study.sh); then wait like it. The chain runs from a copy of the
# tree, so later device commands (which lay the working tree anew) cannot change its code.
#   bash tools/h200/h200-chain.sh 480 studies/2026-12-01-four-variants-gpu-sharing/recipes/qwen0.5b-4variants.yaml studies/2026-12-01-fp8-kv-cache/recipes/qwen0.5b-served-check.yaml
set -uo pipefail
wait_s=$1; shift
bash tools/h200/h200-prepare.sh || exit 2
for recipe in "$@"; do [ -f "$recipe" ] || { echo "h200-chain: no recipe $recipe" >&2; exit 2; }; done
if pgrep -f "[h]200-chain-loop" >/dev/null; then echo "h200-chain: a chain is still running (tools/h200/h200-wait.sh)" >&2; exit 2; fi
src=/tmp/suite-chain-src
rm -rf "$src" && cp -r . "$src"
: > /tmp/h200-chain.log
cat > /tmp/h200-chain-loop.sh <<LOOP
cd $src
for recipe in $*; do
  echo "\$(date +%T) chain: \$recipe" >> /tmp/h200-chain.log
  bash tools/h200/h200-run.sh "\$recipe" "/tmp/runs-\$(basename "\$recipe" .yaml)" >> /tmp/h200-chain.log 2>&1 || exit 2
  sleep 2
  while pgrep -f "[p]ython3 -m suite run" >/dev/null; do sleep 5; done
done
echo "\$(date +%T) chain: done" >> /tmp/h200-chain.log
LOOP
setsid nohup bash /tmp/h200-chain-loop.sh > /dev/null 2>&1 < /dev/null &
sleep 5
bash tools/h200/h200-wait.sh "$wait_s"
