#!/usr/bin/env bash
# One H200 command: install the serve bundle (.device/c5 carried last; c0..c4 copied to /tmp/chunks before), join
# the demo model's safetensors from /tmp/mparts (carried as .gpu-model/pNN) with .gpu-model/meta, then
# studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py: grouped against lm-eval's per-request loglikelihood on vLLM 0.26 (CUDA, its
# defaults: torch.compile, CUDA graphs, prefix caching). Writes under $OUT.
set -uo pipefail
t0=$(date +%s)
bash .device/c5/install.sh > /tmp/install.log 2>&1; rc=$?; tail -n 3 /tmp/install.log; [ $rc -eq 0 ] || exit 2
mkdir -p /tmp/model && cat /tmp/mparts/model.part.* > /tmp/model/model.safetensors && cp .gpu-model/meta/* /tmp/model/
echo "$(cat /tmp/model/model.sha256)  /tmp/model/model.safetensors" | sha256sum -c - || exit 2
echo "install + model: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/envs/serve:$(pwd) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
for spec in "mmlu-anatomy-ceval-accountant-5shot-limit30 suite_mmlu_anatomy,suite_ceval_accountant 5 30"; do
  set -- $spec
  timeout 400 python3 studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py /tmp/model --tasks "$2" --num-fewshot "$3" --limit "$4" \
    --engine-arg gpu_memory_utilization=0.5 --out "$OUT/$1.json" > "$OUT/$1.log" 2>&1
  echo "$1: rc=$? at $(( $(date +%s) - t0 )) s"; tail -c 600 "$OUT/$1.json" 2>/dev/null; echo
done
