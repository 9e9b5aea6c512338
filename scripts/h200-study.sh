#!/usr/bin/env bash
# The issue-6 study on a two-GPU H200 machine, after the chunks are in /tmp/chunks and the GGUF pieces in
# /tmp/gguf (docs/results/h200.md): the Llama-3-8B-shape serving study on GPU 0 and the
# Qwen2.5-Coder-0.5B accuracy study on GPU 1, side by side, then wait.
#   bash .device/c6/install.sh >/tmp/install.log 2>&1; bash scripts/h200-study.sh 420
set -uo pipefail
tail -n 3 /tmp/install.log
bash scripts/h200-run.sh recipes/llama3-8b-shape-lean.yaml /tmp/runs-llama 0 || exit 2
# The full benchmark data (carried as .device-data), where the Qwen recipe looks: ../../shared/data
# from the run's copy of recipes/.
mkdir -p /tmp/shared && rm -rf /tmp/shared/data && cp -r .device-data /tmp/shared/data
( cd /tmp/shared/data && sha256sum --quiet -c SHA256SUMS 2>&1 | grep -v tokenizers | head -5 )
t0=$(date +%s); bash scripts/h200-models.sh || exit 2; echo "GGUF converted in $(( $(date +%s) - t0 )) s"
bash scripts/h200-run.sh recipes/qwen2.5-coder-0.5b.yaml /tmp/runs-qwen 1 || exit 2
bash scripts/h200-wait.sh "${1:-420}"
