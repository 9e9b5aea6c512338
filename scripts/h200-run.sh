#!/usr/bin/env bash
# Start `suite run RECIPE` on the project's H200 machine, in the background (it outlives this command
# while the machine is held), after the bundle's install.sh has made /tmp/envs/{serve,quantize}.
#   bash scripts/h200-run.sh recipes/smollm2-gpu.yaml /tmp/runs
# Then `bash scripts/h200-wait.sh SECONDS` in each following command. docs/results/h200.md has the steps.
set -uo pipefail
recipe=$1 out=$2
# Run from a copy: every device command lays the working tree anew, which would pull the files (and
# the evaluate stage's working directory) from under a run that is still going.
rm -rf /tmp/suite-src && cp -r . /tmp/suite-src && cd /tmp/suite-src
repo=$(pwd)
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# The quantize stage's interpreter: the device Python with the llmcompressor environment first.
printf '#!/bin/sh\nPYTHONPATH=/tmp/envs/quantize:%s exec python3 "$@"\n' "$repo" > /tmp/quantize-python
chmod +x /tmp/quantize-python
export SUITE_QUANTIZE_PYTHON=/tmp/quantize-python PYTHONPATH=$repo:/tmp/envs/serve
if [ ! -f models/smollm2-135m-instruct/.complete ] && ls /tmp/gguf/smolpart.* >/dev/null 2>&1; then
  cat /tmp/gguf/smolpart.* > /tmp/smollm2.gguf
  PYTHONPATH=/tmp/envs/quantize:$repo python3 -m suite.models convert-gguf --gguf /tmp/smollm2.gguf \
    --out models/smollm2-135m-instruct || exit 2
fi
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv
python3 -m suite validate "$recipe" || exit 2
setsid nohup python3 -m suite run "$recipe" --out "$out" > /tmp/suite-run.log 2>&1 < /dev/null &
echo "started suite run (log /tmp/suite-run.log)"
