"""`suite sensitivity RECIPE --variant NAME`."""

from __future__ import annotations

NAME = "sensitivity"
HELP = ("rank decoder layers by how much FP8 moves the model (KL against "
        "BF16 on held-out calibration text) and suggest which to keep in BF16")
DESCRIPTION = ("Quantizes one block of decoder layers at a time with the variant's scheme "
               "(compressed-tensors quantize-dequantize) and measures KL(BF16 || FP8) per token and "
               "perplexity on calibration rows that calibration did not use.")
EXAMPLES = (
    "suite sensitivity recipes/demo-cpu.yaml --variant fp8-kv --block 2",
    "suite sensitivity recipes/demo-cpu.yaml --variant fp8-kv --kv",
)


def add_arguments(sn) -> None:
    sn.add_argument("recipe")
    sn.add_argument("--variant", required=True, help="a variant with scheme FP8 or FP8_DYNAMIC (--kv: an FP8 KV cache)")
    sn.add_argument("--samples", type=int, help="held-out texts (default 8; --kv: eval.kv_check_texts)")
    sn.add_argument("--max-seq-length", type=int, help="tokens per text (default 256; --kv: eval.kv_check_tokens)")
    sn.add_argument("--block", type=int, default=1, help="decoder layers quantized together (default 1)")
    sn.add_argument("--calibration", help="calibration set to draw the texts from (default: the variant's)")
    sn.add_argument("--top", type=int, default=10, help="rows to print")
    sn.add_argument("--out", help="folder for the result (default: <output_dir>/sensitivity)")
    sn.add_argument("--kv", action="store_true", help="FP8 KV cache instead of weights: one layer's KV in FP8 at a "
                    "time (the variant's kv_scales), ranked by KL, and the kv_skip_layers: auto choice; texts from "
                    "tasks/data/longtext (--samples texts, --max-seq-length tokens: default eval.kv_check_*)")


def run(args) -> int:
    # lazy: `suite --help` imports every command module; the work loads when it runs
    from suite.cli.sensitivity import cmd_sensitivity

    return cmd_sensitivity(args)
