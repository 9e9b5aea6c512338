#!/usr/bin/env bash
# Issue 18's GPU proof: rebuild the 512-sample calibrated FP8 KV checkpoint of Qwen2.5-Coder-0.5B-Instruct
# with the suite's quantize stage (the recipe of ../shared/results/h200-qwen0.5b-4variants), read its scales,
# then score full GSM8K + HumanEval with the suite's evaluate stage for the KV configurations that
# docs/kv-scales.md asks for (layer 0 kept in BF16, Triton against FlashAttention 3, eager against compiled).
# Run on the device machine from a snapshot of the project in .gpu/proj, after the bundle's install.sh:
#   bash .gpu/proj/studies/2026-12-01-fp8-kv-cache/scripts/h200-kv-proof.sh start      # converts + quantizes, starts the evaluations (setsid)
#   bash .gpu/proj/studies/2026-12-01-fp8-kv-cache/scripts/h200-kv-proof.sh wait 540   # waits, then copies what finished to $OUT
# Paired against docs/results/h200-kv-20261201/bf16 (same model file, vLLM 0.26.0, eager).
set -uo pipefail
W=/tmp/kvproof
CKPT=/tmp/proj/runs/checkpoints/fp8kv-cal512
PIN=/tmp/proj/runs/checkpoints/fp8kv-cal512-pinned
M=/tmp/proj/models/qwen2.5-coder-0.5b-instruct
# name|model|kv_cache_dtype|engine_args JSON   (all eager unless enforce_eager is overridden)
CONFIGS=${KV_CONFIGS:-"cal-fa3|$CKPT|fp8|{}
cal-skip0-triton|$CKPT|fp8|{\"attention_backend\":\"TRITON_ATTN\",\"kv_cache_dtype_skip_layers\":[\"0\"]}
cal-triton|$CKPT|fp8|{\"attention_backend\":\"TRITON_ATTN\"}
cal-skip0-8-triton|$CKPT|fp8|{\"attention_backend\":\"TRITON_ATTN\",\"kv_cache_dtype_skip_layers\":[\"0\",\"8\"]}
PINNED
calc-fa3|$M|fp8|{\"calculate_kv_scales\":true}
bf16-again|$M|auto|{}"}
cmd=$1
if [ "$cmd" = start ]; then
  rm -rf /tmp/proj && cp -r .gpu/proj /tmp/proj && mkdir -p $W /tmp/gguf /tmp/shared/data
  cat .gpu/gguf/part.* /tmp/gguf/part.* 2>/dev/null > /tmp/q.gguf; ls -la /tmp/q.gguf; sha256sum /tmp/q.gguf | cut -c1-16 | tee $W/gguf.sha
  rm -rf /tmp/data && cp -r .gpu/data /tmp/data && cp -r .gpu/data/gsm8k /tmp/shared/data/
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > $W/gpu.txt
  cat > $W/run-all.sh <<INNER
set -u
cd /tmp/proj
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
t=\$(date +%s)
PYTHONPATH=/tmp/envs/quantize:/tmp/proj python3 -m tools.models convert-gguf --gguf /tmp/q.gguf --out $M > $W/convert.log 2>&1
echo "convert rc=\$? \$(( \$(date +%s) - t )) s" >> $W/done.txt
PYTHONPATH=/tmp/envs/quantize:/tmp/proj python3 - <<'PY' > $W/quantize.config.json
import json
from suite import calibration
mix = [{"set": "gsm8k-train", "weight": 2.0}, {"set": "ceval-exam", "weight": 1.0}, {"set": "chat-demo", "weight": 1.0}]
print(json.dumps({"model": "$M", "ignore": ["lm_head"], "kv_cache": "fp8", "calibration": mix,
                  "num_calibration_samples": 512, "max_seq_length": 1024, "checkpoint_dir": "$CKPT",
                  "key": "fp8kv-cal512", "provenance": {"calibration_sha256": calibration.content_hash(mix),
                  "as": "h200-qwen0.5b-4variants fp8kv-cal (calibration_sha256 2f69f1b357ca3a60...)"}}, indent=1))
PY
t=\$(date +%s)
PYTHONPATH=/tmp/envs/quantize:/tmp/proj python3 -m suite.stages quantize $W/quantize.config.json $W/quantize.result.json > $W/quantize.log 2>&1
echo "quantize rc=\$? \$(( \$(date +%s) - t )) s" >> $W/done.txt
PYTHONPATH=/tmp/envs/quantize:/tmp/proj python3 - <<'PY' >> $W/done.txt 2>&1
import json, shutil
from pathlib import Path
from suite.kvcheck import read_kv_scales
s = read_kv_scales("$CKPT")
json.dump({str(k): v for k, v in sorted(s.items())}, open("$W/scales.json", "w"), indent=1)
print("layer0", s[0], "layer8", s[8])
if abs(s[0]["k"] - 0.3242) > 1e-4:   # not the CPU value: also score a copy whose layer-0 k_scale is 0.3242
    import torch
    from safetensors.torch import load_file, save_file
    shutil.copytree("$CKPT", "$PIN", dirs_exist_ok=True)
    for f in Path("$PIN").glob("*.safetensors"):
        d = load_file(str(f))
        for k in d:
            if k.endswith("layers.0.self_attn.k_scale"):
                d[k] = torch.full_like(d[k], 0.3242); print("pinned", k, d[k])
        save_file(d, str(f), metadata={"format": "pt"})
    print("PINNED-MADE")
PY
cd /tmp/proj
export PYTHONPATH=/tmp/proj:/tmp/envs/serve
while IFS='|' read -r name model kv args; do
  [ -n "\$name" ] || continue
  if [ "\$name" = PINNED ]; then
    grep -q PINNED-MADE $W/done.txt || continue
    name=pinned-fa3; model=$PIN; kv=fp8; args='{}'
  fi
  python3 - "\$name" "\$model" "\$kv" "\$args" <<'PY'
import json, sys
name, model, kv, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
cfg = {"engine": {"model": model, "dtype": "bfloat16", "max_model_len": 4096, "kv_cache_dtype": kv,
                  "engine_args": {"gpu_memory_utilization": 0.5, "enforce_eager": True, **args}},
       "tasks": [{"name": "suite_gsm8k"}, {"name": "suite_humaneval"}], "batch_size": "auto",
       "data_dir": "/tmp/data", "include_path": "/tmp/proj/tasks", "allow_code_execution": True,
       "code_sandbox": "process", "max_gen_toks": 512, "seed": 1234, "output_dir": f"/tmp/kvproof/{name}"}
json.dump(cfg, open(f"/tmp/kvproof/{name}.config.json", "w"), indent=1)
PY
  t=\$(date +%s)
  python3 -m suite.stages evaluate $W/\$name.config.json $W/\$name.result.json > $W/\$name.log 2>&1
  echo "\$name rc=\$? \$(( \$(date +%s) - t )) s" >> $W/done.txt
done < $W/configs.txt
echo ALL-DONE >> $W/done.txt
INNER
  printf '%s\n' "$CONFIGS" > $W/configs.txt
  R=run-all; setsid nohup bash $W/$R.sh > $W/run-all.log 2>&1 < /dev/null &
  echo started
elif [ "$cmd" = wait ]; then
  limit=${2:-540}; start=$(date +%s)
  while ! grep -q ALL-DONE $W/done.txt 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$limit" ]; do sleep 5; done
  cat $W/done.txt 2>/dev/null
  for f in $W/*.log; do grep -hE "KV cache size|Maximum concurrency|skip_layers|Error|error:" "$f" | sort -u | head -6 | sed "s|^|$(basename $f): |"; done
  [ -n "${OUT:-}" ] && tar czf - -C /tmp --warning=no-file-changed --exclude='*.safetensors' kvproof | split -b 15M - $OUT/kvproof.tar.gz.part- && ls -la $OUT
fi
