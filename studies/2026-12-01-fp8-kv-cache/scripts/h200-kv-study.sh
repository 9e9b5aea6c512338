#!/usr/bin/env bash
# FP8 KV-cache configurations of Qwen2.5-Coder-0.5B-Instruct on the H200, scored by the suite's evaluate
# stage (lm-eval, vLLM backend) on full GSM8K and HumanEval, one engine after another (issue 18's proof).
# Run on the device machine from a snapshot of the project in .gpu/proj (git archive of a commit), after
# the bundle's install.sh, with the GGUF pieces in .gpu/gguf/ (or /tmp/gguf/) and the data in .gpu/data:
#   bash .gpu/proj/studies/2026-12-01-fp8-kv-cache/scripts/h200-kv-study.sh start      # converts the model, starts the study (setsid)
#   bash .gpu/proj/studies/2026-12-01-fp8-kv-cache/scripts/h200-kv-study.sh wait 540   # waits, then copies what finished to $OUT
# Configurations (name|kv_cache_dtype|engine_args JSON), in order of value:
set -uo pipefail
CONFIGS=${KV_CONFIGS:-'bf16|auto|{}
fp8kv-unit|fp8|{}
fp8kv-unit-skip0-8|fp8|{"kv_cache_dtype_skip_layers":["0","8"]}
bf16-rerun|auto|{"max_num_seqs":128}
fp8kv-unit-skip0|fp8|{"kv_cache_dtype_skip_layers":["0"]}
fp8kv-unit-skip0-1|fp8|{"kv_cache_dtype_skip_layers":["0","1"]}'}
W=/tmp/kvstudy
cmd=$1
if [ "$cmd" = start ]; then
  rm -rf /tmp/proj && cp -r .gpu/proj /tmp/proj && mkdir -p $W /tmp/gguf
  cat .gpu/gguf/part.* /tmp/gguf/part.* 2>/dev/null > /tmp/q.gguf; ls -la /tmp/q.gguf; sha256sum /tmp/q.gguf | cut -c1-16
  rm -rf /tmp/data && cp -r .gpu/data /tmp/data
  cd /tmp/proj
  export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
  t0=$(date +%s)
  PYTHONPATH=/tmp/envs/quantize:/tmp/proj python3 -m tools.models convert-gguf --gguf /tmp/q.gguf \
    --out /tmp/proj/models/qwen2.5-coder-0.5b-instruct > $W/convert.log 2>&1 || { tail -5 $W/convert.log; exit 2; }
  echo "converted in $(( $(date +%s) - t0 )) s"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > $W/gpu.txt
  printf '%s\n' "$CONFIGS" > $W/configs.txt
  cat > $W/run-all.sh <<'INNER'
set -u
cd /tmp/proj
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/proj:/tmp/envs/serve
while IFS='|' read -r name kv args; do
  [ -n "$name" ] || continue
  python3 - "$name" "$kv" "$args" <<'PY'
import json, sys
name, kv, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cfg = {"engine": {"model": "/tmp/proj/models/qwen2.5-coder-0.5b-instruct", "dtype": "bfloat16", "max_model_len": 4096,
                  "kv_cache_dtype": kv, "engine_args": {"gpu_memory_utilization": 0.5, "enforce_eager": True, **args}},
       "tasks": [{"name": "suite_gsm8k"}, {"name": "suite_humaneval"}], "batch_size": "auto",
       "data_dir": "/tmp/data", "include_path": "/tmp/proj/tasks", "allow_code_execution": True,
       "max_gen_toks": 512, "seed": 1234, "output_dir": f"/tmp/kvstudy/{name}"}
json.dump(cfg, open(f"/tmp/kvstudy/{name}.config.json", "w"), indent=1)
PY
  t=$(date +%s)
  python3 -m suite.stages evaluate /tmp/kvstudy/$name.config.json /tmp/kvstudy/$name.result.json > /tmp/kvstudy/$name.log 2>&1
  echo "$name rc=$? $(( $(date +%s) - t )) s" >> /tmp/kvstudy/done.txt
done < /tmp/kvstudy/configs.txt
echo ALL-DONE >> /tmp/kvstudy/done.txt
INNER
  setsid nohup bash $W/run-all.sh > $W/run-all.log 2>&1 < /dev/null &
  echo started
elif [ "$cmd" = wait ]; then
  limit=${2:-540}; start=$(date +%s)
  while ! grep -q ALL-DONE $W/done.txt 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do sleep 5; done
  cat $W/done.txt 2>/dev/null
  for f in $W/*.log; do grep -hE "KV cache size|Maximum concurrency|kv_cache_dtype_skip|Error|error:" "$f" | sort -u | head -6 | sed "s|^|$(basename $f): |"; done
  [ -n "${OUT:-}" ] && tar czf - -C /tmp --warning=no-file-changed kvstudy | split -b 15M - $OUT/kvstudy.tar.gz.part- && ls -la $OUT
fi
