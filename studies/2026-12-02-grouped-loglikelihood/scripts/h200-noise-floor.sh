#!/usr/bin/env bash
# One H200 command: install the serve bundle (its last chunk carried here as .device-serve/c5, the others copied to
# /tmp/chunks before), join the demo model (/tmp/mparts, carried as .gpu-model/pNN, with .gpu-model/meta), then
# studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py --noise-floor on the real MMLU anatomy (test) and C-Eval accountant (val) rows
# (.device-nfdata: those two subjects of ../shared/data), 5-shot: grouped against lm-eval's per-request path, and
# that path against itself at batch size 1, on vLLM 0.26 with its defaults (torch.compile, CUDA graphs, prefix
# caching). Writes under $OUT.
set -uo pipefail
t0=$(date +%s)
bash .device-serve/c5/install.sh > /tmp/install.log 2>&1; rc=$?; tail -n 2 /tmp/install.log; [ $rc -eq 0 ] || exit 2
mkdir -p /tmp/model && cat /tmp/mparts/model.part.* > /tmp/model/model.safetensors && cp .gpu-model/meta/* /tmp/model/
echo "$(cat /tmp/model/model.sha256)  /tmp/model/model.safetensors" | sha256sum -c - || exit 2
echo "install + model: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/envs/serve:$(pwd) HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
name=smollm2-mmlu-anatomy-ceval-accountant-5shot-noise-floor
timeout 380 python3 studies/2026-12-02-grouped-loglikelihood/scripts/loglikelihood_bench.py /tmp/model --tasks suite_mmlu_anatomy,suite_ceval_accountant \
  --num-fewshot 5 --limit 200 --data-dir "$(pwd)/.device-nfdata" --noise-floor \
  --engine-arg gpu_memory_utilization=0.5 --out "$OUT/$name.json" > /tmp/$name.log 2>&1
echo "rc=$? at $(( $(date +%s) - t0 )) s"; tail -c 300000 /tmp/$name.log | gzip > "$OUT/$name.log.gz"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('values'); print(json.dumps(d))" "$OUT/$name.json"
