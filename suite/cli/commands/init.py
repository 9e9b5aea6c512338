"""`suite init MODEL`."""

from __future__ import annotations

NAME = "init"
HELP = "write a commented starter recipe for a model (hub id or folder)"
DESCRIPTION = ("Writes a starter recipe for MODEL (a Hugging Face id org/name, or a local model folder): a BF16 "
               "baseline, an FP8 build this environment's vLLM serves (FP8_DYNAMIC on CUDA, an FP8 KV cache on the CPU build), GSM8K and MMLU on a slice, one load point and "
               "two gates, each choice commented. `suite validate` accepts it as written.")
EXAMPLES = (
    "suite init Qwen/Qwen2.5-0.5B-Instruct",
    "suite init ./models/smollm2-135m-instruct --out recipes/smollm2.yaml",
)


def add_arguments(parser) -> None:
    parser.add_argument("model", help="a Hugging Face model id (org/name) or a local model folder")
    parser.add_argument("--out", metavar="FILE", help="where to write it (default: <model>-fp8.yaml here)")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="the FP8 build to start "
                        "with: cuda (FP8_DYNAMIC weights), cpu (an FP8 KV cache: what the CPU build of vLLM serves); "
                        "auto: this environment's vLLM")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.init import cmd_init

    return cmd_init(args)
