#!/usr/bin/env bash
# Start one `suite run` per RECIPE:GPU on the project's H200 machine, side by side (one GPU each), after
# the chunks are in /tmp/chunks and any GGUF pieces in /tmp/gguf (docs/results/h200.md), then wait.
#   bash .device/c6/install.sh >/tmp/install.log 2>&1
#   bash studies/2026-12-02-qwen-coder-study/scripts/h200-study.sh 480 studies/2026-11-30-h200-first-sessions/recipes/llama3-8b-shape-lean.yaml:0 recipes/qwen2.5-coder-0.5b.yaml:1
# Carry .device-data (a copy of ../shared/data) for recipes that read it: it is put where they look,
# ../../shared/data from a run's copy of recipes/.
set -uo pipefail
wait_s=$1; shift
bash tools/h200/h200-prepare.sh || exit 2
for job in "$@"; do
  recipe=${job%:*} gpu=${job##*:}
  [ "$recipe" = "$job" ] && gpu=""  # no :GPU given: the run sees every GPU (2026-12-01: it got the recipe path)
  bash tools/h200/h200-run.sh "$recipe" "/tmp/runs-$(basename "$recipe" .yaml)" "$gpu" || exit 2
done
bash tools/h200/h200-wait.sh "$wait_s"
