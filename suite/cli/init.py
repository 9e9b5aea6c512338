"""`suite init MODEL`: a commented starter recipe for a hub id or a local model folder, that `suite validate` accepts.

The starter is one BF16 baseline and one FP8 build the machine's vLLM serves (on CUDA FP8_DYNAMIC: per-channel FP8
weights, dynamic per-token FP8 activations, no calibration data; on the CPU build an FP8 KV cache), two of the suite's tasks on a slice, one load point and two gates: small
enough to run once to see every part work, with a comment on each choice saying what to change for a release decision.
A folder is written relative to the recipe (recipes hold no host paths); a hub id as given.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from suite.recipe.checkpoint import is_local_model
from suite.runtime.envs import vllm_platform
from suite.runtime.errors import EXIT_OK, Problem, SuiteError

_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_.-]+")

# the FP8 build by what the machine's vLLM serves (`suite validate` refuses what it cannot)
VARIANTS = {
    "cuda": """\
  # FP8 weights and activations with dynamic per-token activation scales: needs no calibration data. Add more
  # builds here (scheme FP8 with a calibration set, kv_cache: fp8; `suite schema` lists the schemes), or serve an
  # FP8 checkpoint you already have: {name: mine, model: org/name-or-folder}.
  - name: fp8-dynamic
    quantization:
      scheme: FP8_DYNAMIC
      ignore: [lm_head]
""",
    "cpu": """\
  # This machine's vLLM is the CPU build, which serves BF16 weights with an FP8 KV cache but runs FP8 weights
  # through a reference kernel (`suite validate` refuses them): the FP8 build here is the KV cache, its scales
  # calibrated into the checkpoint. On a CUDA machine: scheme: FP8_DYNAMIC (no data) or FP8 with a calibration set.
  - name: fp8-kv
    quantization:
      kv_cache: fp8
      calibration: chat-demo      # a calibration set shipped with the suite; a set YAML of your own works too
      num_calibration_samples: 64
      max_seq_length: 512
    kv_cache_dtype: fp8
""",
}

TEMPLATE = """\
# A starter recipe for {model}, written by `suite init`.
# Check it with `suite validate {file}`, run it with `suite run {file}`; a field changed for one run:
# --set eval.tasks[0].limit=200. Every field is described by `suite schema`; how to write one: docs/02-recipes.md.
schema_version: 1
name: {name}
description: {model}, BF16 baseline against an FP8 build
model:
  id: {model_ref}{model_note}
  # revision: <40-hex commit>  # a hub id at a fixed commit: what `suite gate` registers a hub checkpoint by
  dtype: bfloat16
  max_model_len: 4096
baseline:
  name: bf16
variants:
{variants}eval:
  tasks:
    # limit: rows per task (per subject for MMLU). A slice shows every part working; a release decision needs
    # the paired 95% interval to clear the gate, which takes hundreds of rows (`suite gate` says how many).
    - {{name: suite_gsm8k, limit: 100}}
    - {{name: suite_mmlu, limit: 5}}
  # include_path: my-tasks/  # your own lm-eval task YAMLs (`suite tasks {file}` lists them)
throughput:
  # vllm bench serve on random prompts at each request rate (inf: all at once, the saturation point)
  input_len: 512
  output_len: 128
  num_prompts: 200
  request_rates: [inf]
gates:
  # `suite gate RUN` passes (0), fails (1) or is inconclusive (3) on these
  default_max_drop: 0.02      # each task's accuracy may drop by at most 2 points
  min_throughput_gain: 1.0    # the FP8 build must serve at least as fast as BF16
output_dir: runs              # run folders are made here (relative to this file)
"""


def starter_name(model: str) -> str:
    """A recipe name from the model's last path component or hub name (letters, digits, _ . - only)."""
    base = _NOT_IN_NAMES.sub("-", Path(model.rstrip("/")).name).strip("-._") or "model"
    return base[:58].lower() + "-fp8"


def starter(model: str, out: Path, device: str = "cuda") -> str:
    """The starter recipe's text for ``model`` (a hub id org/name, or a folder) written at ``out``, its FP8 build one
    that ``device``'s vLLM serves (cuda or cpu)."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        ref = os.path.relpath(os.path.abspath(folder), os.path.abspath(out.parent))  # links kept as the user named them
        ref = ref if ref.startswith(".") else f"./{ref}"
        note = "  # a folder, relative to this file"
    elif is_local_model(model):
        raise SuiteError(Problem("suite init", "MODEL", f"{model!r} is not a folder here, nor a hub id (org/name)",
                                 "give a model folder with config.json, or a Hugging Face id such as org/name"))
    else:
        ref, note = model, "  # a Hugging Face id (org/name); a local folder works too"
    shown = folder.name if folder.is_dir() else model  # no host path in the recipe's words
    file = out.name if out.is_absolute() else out.as_posix()
    return TEMPLATE.format(model=shown, file=file, name=starter_name(model), model_ref=ref, model_note=note,
                           variants=VARIANTS[device])


def cmd_init(args) -> int:
    out = Path(args.out) if args.out else Path(f"{starter_name(args.model)}.yaml")
    if out.exists() and not args.force:
        raise SuiteError(Problem(str(out), "", "exists already", "give another --out, or --force to replace it"))
    device = args.device
    if device == "auto":  # what this machine's serve environment is: the recipe is validated against it
        device = "cpu" if vllm_platform() == "cpu" else "cuda"
    text = starter(args.model, out, device)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    except OSError as e:
        raise SuiteError(Problem(str(out), "", f"cannot write it: {e.strerror or e}", "give a writable --out")) from None
    print(f"{out}: a starter recipe for {args.model} ({device}); next: suite validate {out}")
    return EXIT_OK
