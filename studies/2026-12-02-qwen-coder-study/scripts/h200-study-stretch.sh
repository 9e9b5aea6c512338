#!/usr/bin/env bash
# One stretch of issue 16's study on the project's H200 machine (after install.sh, the GGUF pieces in /tmp/gguf and
# the data in /tmp/device-data or .device-data): start `suite run studies/2026-12-02-qwen-coder-study/recipes/qwen2.5-coder-study.yaml` (or continue it
# with `--resume` when /tmp/resume holds an earlier stretch's archive: tools/h200/h200-run.sh), and beside it, once,
# (with NOISE_FLOOR=1) lm-eval's loglikelihood noise floor on the same model (studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py --noise-floor: grouped
# against lm-eval's per-request path, and that path against itself at batch size 1; a fixed 4-GiB KV cache so that
# it fits beside the study's five 0.2 shares), then wait like tools/h200/h200-wait.sh.
#   bash .device/cN/install.sh >/tmp/install.log 2>&1; bash studies/2026-12-02-qwen-coder-study/scripts/h200-study-stretch.sh 480
set -uo pipefail
wait_s=$1
recipe=studies/2026-12-02-qwen-coder-study/recipes/qwen2.5-coder-study.yaml
bash tools/h200/h200-prepare.sh || exit 2
bash tools/h200/h200-run.sh "$recipe" /tmp/runs-qwen2.5-coder-study || exit 2
src=/tmp/suite-src-qwen2.5-coder-study   # h200-run.sh's copy of the tree (later commands lay this one anew)
if [ "${NOISE_FLOOR:-0}" = 1 ] && [ ! -d /tmp/extra-out ]; then
  mkdir -p /tmp/extra-out
  ( cd "$src" && PYTHONPATH=/tmp/envs/serve:$src HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
    setsid nohup timeout 1200 python3 studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py models/qwen2.5-coder-0.5b-instruct \
      --tasks suite_mmlu_anatomy,suite_ceval_accountant --num-fewshot 5 --limit 100 --noise-floor \
      --data-dir /tmp/shared/data \
      --engine-arg kv_cache_memory_bytes=4294967296 --engine-arg gpu_memory_utilization=0.1 \
      --out /tmp/extra-out/noise-floor-qwen0.5b-5shot-limit100.json \
      > /tmp/extra-out/noise-floor-qwen0.5b-5shot-limit100.log 2>&1 < /dev/null & )
  echo "noise floor started (/tmp/extra-out)"
fi
bash tools/h200/h200-wait.sh "$wait_s"
