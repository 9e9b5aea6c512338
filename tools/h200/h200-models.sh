#!/usr/bin/env bash
# Join GGUF pieces carried to /tmp/gguf/<model-folder>/part.* and convert each to models/<model-folder>
# (BF16 safetensors) in the quantize environment, unless it is there already.
set -uo pipefail
for dir in /tmp/gguf/*/; do
  [ -d "$dir" ] || continue
  name=$(basename "$dir")
  [ -f "models/$name/.complete" ] && continue
  cat "$dir"part.* > "/tmp/$name.gguf"
  PYTHONPATH=/tmp/envs/quantize:$(pwd) python3 -m tools.models convert-gguf --gguf "/tmp/$name.gguf" \
    --out "models/$name" || exit 2
done
