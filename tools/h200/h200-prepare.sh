#!/usr/bin/env bash
# What every H200 study script does first, after install.sh: show the install's end, put .device-data (a copy of
# ../shared/data, when carried) where a run's copy of recipes/ looks (../../shared/data, i.e. /tmp/shared/data)
# with suite_longppl's texts beside it, and make the models from any GGUF pieces in /tmp/gguf.
#   bash tools/h200/h200-prepare.sh || exit 2     (studies/2026-12-02-qwen-coder-study/scripts/h200-study.sh, tools/h200/h200-chain.sh)
set -uo pipefail
tail -n 3 /tmp/install.log
# The bundle installs its wheels without bytecode (pip --no-compile), so the first process to import vLLM, torch and
# lm-eval compiles them: the first evaluation's engine start spent 41 s on imports, config and spawn, the next ones
# 11-12 s (docs/results/h200-eval1-20261204). Compiled here in the background on all cores, at low priority beside the
# models being made, once install.sh (perhaps still running in the background) has finished; compileall.log says
# when it ran and how it ended, .compiled that it need not run again.
if [ -f /tmp/envs/.complete ] && [ ! -f /tmp/envs/.compiled ]; then
  (setsid nohup sh -c 's=$(date +%s); nice -n 10 python3 -m compileall -q -j 0 /tmp/envs/serve /tmp/envs/quantize >/dev/null 2>&1;
     rc=$?; echo "compileall: rc $rc, $(date -d @$s +%T)-$(date +%T), $(( $(date +%s) - s )) s" > /tmp/compileall.log;
     [ $rc -eq 0 ] && touch /tmp/envs/.compiled' </dev/null >/dev/null 2>&1 &)
elif [ ! -f /tmp/envs/.complete ]; then
  echo "h200-prepare: install.sh has not finished: the environments are not byte-compiled"
fi
# .device-data may come with this command, or with an earlier one that copied it to /tmp/device-data (a command
# carries at most 64 MiB with the tree: the data does not always fit beside a bundle chunk)
data=.device-data; [ -d "$data" ] || data=/tmp/device-data
if [ -d "$data" ]; then
  mkdir -p /tmp/shared && rm -rf /tmp/shared/data && cp -r "$data" /tmp/shared/data
  ( cd /tmp/shared/data && sha256sum --quiet -c SHA256SUMS 2>&1 | head -5 )
  cp -r tasks/data/longtext /tmp/shared/data/  # suite_longppl's texts (in the repo, not in ../shared/data)
fi
t0=$(date +%s); bash tools/h200/h200-models.sh || exit 2; echo "models ready in $(( $(date +%s) - t0 )) s"
