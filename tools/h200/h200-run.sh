#!/usr/bin/env bash
# Start `suite run RECIPE` on the project's H200 machine, in the background (it outlives this command
# while the machine is held), after the bundle's install.sh has made /tmp/envs/{serve,quantize}.
#   bash tools/h200/h200-run.sh recipes/smollm2-gpu.yaml /tmp/runs [GPU]
# GPU (an index) pins the run to one GPU, so that two runs can share a machine of two GPUs.
# Then `bash tools/h200/h200-wait.sh SECONDS` in each following command. docs/results/h200.md has the steps.
# To continue a study on a fresh machine, carry the archive parts an earlier machine's h200-wait.sh wrote for
# this OUT ($(basename OUT).tar.gz.part-*, e.g. runs-NAME.tar.gz.part-aa for h200-chain.sh's /tmp/runs-NAME) to
# /tmp/resume/: they are unpacked into OUT and the run goes on with `suite run --resume` (missing stages run;
# checkpoints are rebuilt from their content keys).
set -uo pipefail
recipe=$1 out=$2 gpu=${3:-}
name=$(basename "$recipe" .yaml)
resume=""
tag=$(basename "$out")
if ls /tmp/resume/*.part-* >/dev/null 2>&1; then
  if ! ls /tmp/resume/"$tag".tar.gz.part-* >/dev/null 2>&1; then
    echo "h200-run: /tmp/resume holds $(ls /tmp/resume | head -3 | tr '\n' ' ')but no $tag.tar.gz.part-* for $out" >&2
    exit 2
  fi
  if ls -d "$out"/2*/ >/dev/null 2>&1; then
    echo "h200-run: $out already holds a run; not unpacking /tmp/resume over it" >&2
    exit 2
  fi
  mkdir -p "$out" && cat /tmp/resume/"$tag".tar.gz.part-* | tar xzf - -C "$out" || exit 2
  resume=$(ls -d "$out"/2*/ | tail -1)
  echo "h200-run: continuing $resume (from /tmp/resume/$tag.tar.gz.part-*)"
fi
# Run from a copy: every device command lays the working tree anew, which would pull the files (and
# the evaluate stage's working directory) from under a run that is still going.
src=/tmp/suite-src-$name
rm -rf "$src" && cp -r . "$src" && cd "$src"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ -n "$gpu" ]; then
  [[ "$gpu" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "h200-run: GPU must be an index list like 0 or 0,1, not '$gpu'" >&2; exit 2; }
  export CUDA_VISIBLE_DEVICES=$gpu
fi
# The quantize stage's interpreter: the device Python with the llmcompressor environment first.
printf '#!/bin/sh\nPYTHONPATH=/tmp/envs/quantize:%s exec python3 "$@"\n' "$src" > "/tmp/quantize-python-$name"
chmod +x "/tmp/quantize-python-$name"
export SUITE_QUANTIZE_PYTHON=/tmp/quantize-python-$name PYTHONPATH=$src:/tmp/envs/serve
nvidia-smi --query-gpu=index,name,memory.total,memory.used,clocks.sm --format=csv
python3 -m suite validate "$recipe" || exit 2
if [ -n "$resume" ]; then
  setsid nohup python3 -m suite run --resume "$resume" > "/tmp/suite-run-$name.log" 2>&1 < /dev/null &
else
  setsid nohup python3 -m suite run "$recipe" --out "$out" > "/tmp/suite-run-$name.log" 2>&1 < /dev/null &
fi
echo "started suite run $recipe on GPU ${gpu:-all} (log /tmp/suite-run-$name.log)"
