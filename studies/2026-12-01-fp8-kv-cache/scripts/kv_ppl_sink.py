"""Does FP8 error on the attention-sink token explain why unit-scale FP8 KV *lowers* perplexity (issue 18)?

On the H200, Qwen2.5-Coder-0.5B-Instruct with vLLM's FP8 KV cache at scale 1.0 scored a lower token
perplexity than BF16 KV on Jane Austen documents scored as ``<|endoftext|>`` + document, and a higher one
on spans scored without that prefix (docs/results/h200-kv-proof-20261201/README.md). This script runs, on
CPU in Hugging Face transformers, a fake quant (quantize-dequantize to ``torch.float8_e4m3fn`` with
``suite.stages.quantize.kvcheck.fp8_e4m3_qdq``) of K after bias + RoPE and of V inside the attention
function (the same registration as ``kvcheck.load_hooked_model``), with per-position control:

  * which positions of K / V are quantized: all, all but position 0 (the sink), only position 0;
  * what is done at the sink: full E4M3 (clamp +-448 + rounding), clamp only, rounding only (no clamp);
  * per-layer statistics of K / V at the sink against other positions;
  * attention mass on position 0 (mean over heads and query positions >= 1) per layer.

Writes a JSON of all numbers and prints Markdown tables (docs/kv-ppl-sink.md).

  nice -n 10 flock /tmp/suite-heavy.lock .venv/bin/python studies/2026-12-01-fp8-kv-cache/scripts/kv_ppl_sink.py --docs 0,1,2,3 \
      --max-tokens 1536 --out /tmp/kv_ppl_sink.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from suite.stages.quantize.kvcheck import FP8_E4M3_CLIP, FP8_E4M3_MAX, fp8_e4m3_qdq  # noqa: E402

MODEL = ROOT / "models" / "qwen2.5-coder-0.5b-instruct"
DOCS = ROOT / "tasks" / "data" / "longtext" / "docs.jsonl"
EOT = "<|endoftext|>"
HOOK = "suite_kv_ppl_sink"


# ----- element transforms -----

def round_e4m3_noclamp(x: torch.Tensor) -> torch.Tensor:
    """E4M3 rounding (3 mantissa bits, round to nearest even, subnormals below 2**-6) with an unbounded
    exponent: what E4M3 would do without saturation at +-448. Equal to fp8_e4m3_qdq where |x| <= 448."""
    xf = x.float()
    inside = xf.abs() <= FP8_E4M3_MAX
    q = fp8_e4m3_qdq(xf.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX), 1.0)
    e = torch.floor(torch.log2(xf.abs().clamp_min(1e-30)))
    step = torch.exp2(e - 3)
    big = torch.round(xf / step) * step  # torch.round: half to even
    return torch.where(inside, q, big).to(x.dtype)


FNS = {
    None: lambda x: x,
    "fp8": lambda x: fp8_e4m3_qdq(x, 1.0),                          # clamp + round (vLLM, scale 1.0)
    "clamp": lambda x: x.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX),        # saturation only
    "round": round_e4m3_noclamp,                                    # rounding only
    "bf16": lambda x: x.to(torch.bfloat16).to(x.dtype),             # a BF16 KV cache
}


# ----- hook state -----

class State:
    def __init__(self, k_sink=None, k_rest=None, v_sink=None, v_rest=None, measure=False, mass=False, layers=None):
        self.layers = None if layers is None else frozenset(layers)  # quantize only these layers (None: all)
        self.fn = {("k", "sink"): k_sink, ("k", "rest"): k_rest, ("v", "sink"): v_sink, ("v", "rest"): v_rest}
        self.measure = measure
        self.mass = mass
        self.stats: dict[int, dict] = {}
        self.attn_mass: dict[int, float] = {}
        self.attn_logit: dict[int, dict] = {}
        self.attn_first: dict[int, list] = {}
        self.massive: list = []  # (position, max |h|) with max |h| > MASSIVE at hidden layer MASSIVE_LAYER


STATE: State | None = None


def _apply(x: torch.Tensor, kind: str, st: State) -> torch.Tensor:
    fs, fr = st.fn[(kind, "sink")], st.fn[(kind, "rest")]
    if fs is None and fr is None:
        return x
    out = x.clone()
    out[:, :, :1] = FNS[fs](x[:, :, :1])
    out[:, :, 1:] = FNS[fr](x[:, :, 1:])
    return out


def _measure(layer: int, key: torch.Tensor, value: torch.Tensor, st: State) -> None:
    d = {}
    for kind, x in (("k", key), ("v", value)):
        xf = x.float()
        for where, sl in (("sink", slice(0, 1)), ("rest", slice(1, None))):
            t = xf[:, :, sl]
            q = fp8_e4m3_qdq(t, 1.0)
            d[f"{kind}_{where}_absmax"] = float(t.abs().max())
            d[f"{kind}_{where}_norm"] = float(t.norm(dim=-1).mean())  # mean per-(head, token) L2 norm
            d[f"{kind}_{where}_clipped"] = float((t.abs() > FP8_E4M3_CLIP).float().mean())
            d[f"{kind}_{where}_relerr"] = float((t - q).norm() / t.norm().clamp_min(1e-30))
    st.stats[layer] = d


def _sink_mass(module, query, key, layer, st: State) -> None:
    """Mean attention probability on position 0 over heads and query positions >= 1, and the mean
    pre-softmax logit of position 0 minus the mean logit of the other keys (causal)."""
    b, hq, n, dh = query.shape
    rep = hq // key.shape[1]
    k = key.float().repeat_interleave(rep, dim=1)
    scale = getattr(module, "scaling", dh ** -0.5)
    s = torch.matmul(query.float(), k.transpose(-1, -2)) * scale  # (b, h, n, n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    s = s.masked_fill(~causal, float("-inf"))
    p = s.softmax(-1)
    st.attn_mass[layer] = float(p[:, :, 1:, 0].mean())
    st.attn_first[layer] = p[0, :, 8:, :8].mean(dim=(0, 1)).tolist()  # mass on key positions 0..7, queries >= 8
    per_head = p[0, :, 1:, 0].mean(-1)
    s0 = s[0, :, 1:, 0]
    srest = s[0, :, 1:, 1:].masked_fill(~causal[1:, 1:], 0.0).sum(-1) / torch.arange(1, n).float()
    st.attn_logit[layer] = {"mass_per_head": per_head.tolist(), "logit_sink_minus_rest": float((s0 - srest).mean())}


def _attention(module, query, key, value, attention_mask, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    st = STATE
    layer = int(getattr(module, "layer_idx", -1))
    if st is not None:
        if st.measure:
            _measure(layer, key, value, st)
        if st.layers is None or layer in st.layers:
            key = _apply(key, "k", st)
            value = _apply(value, "v", st)
        if st.mass:
            _sink_mass(module, query, key, layer, st)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def load_model(dtype: str):
    from transformers import AttentionInterface, AutoModelForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(HOOK, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(HOOK, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return AutoModelForCausalLM.from_pretrained(str(MODEL), dtype=getattr(torch, dtype),
                                                attn_implementation=HOOK).eval()


MASSIVE, MASSIVE_LAYER = 100.0, 6  # "massive activation": a residual-stream component > 100 (others <= ~20)


def token_nll(model, ids: torch.Tensor, st: State | None) -> torch.Tensor:
    """NLL of token t given tokens < t, for t = 1 .. n-1 (float32, shape n-1). Records in ``st.massive``
    the positions (among the first 64) whose hidden state after layer MASSIVE_LAYER has a massive activation."""
    global STATE
    STATE = st
    try:
        with torch.inference_mode():
            o = model(input_ids=ids[None], use_cache=False, output_hidden_states=True)
            logits = o.logits[0].float()
    finally:
        STATE = None
    if st is not None:
        h = o.hidden_states[MASSIVE_LAYER][0, :64].float().abs().amax(-1)
        st.massive = [(int(i), round(float(h[i]))) for i in range(len(h)) if h[i] > MASSIVE]
    lp = torch.log_softmax(logits[:-1], -1)
    return -lp.gather(-1, ids[1:, None])[:, 0]


# configurations: name -> State kwargs (sink / rest transform for K and V)
CONFIGS = {
    "fp8 all": dict(k_sink="fp8", k_rest="fp8", v_sink="fp8", v_rest="fp8"),
    "fp8 all but sink": dict(k_rest="fp8", v_rest="fp8"),
    "fp8 sink only": dict(k_sink="fp8", v_sink="fp8"),
    "fp8 sink K only": dict(k_sink="fp8"),
    "fp8 sink V only": dict(v_sink="fp8"),
    "sink clamp only": dict(k_sink="clamp", v_sink="clamp"),
    "sink round only": dict(k_sink="round", v_sink="round"),
    "fp8 sink K layers 0-2 only": dict(k_sink="fp8", layers=range(0, 3)),
    "fp8 all layers 3-23 only": dict(k_sink="fp8", k_rest="fp8", v_sink="fp8", v_rest="fp8", layers=range(3, 24)),
    "bf16 all": dict(k_sink="bf16", k_rest="bf16", v_sink="bf16", v_rest="bf16"),
}


def probe(model, tok) -> str:
    """How much the first document token (position 1) attends to <|endoftext|> (position 0) in layers 0-3,
    full precision vs FP8 on the sink's K only vs FP8 everywhere (``--probe``)."""
    global _sink_mass
    rec: dict = {}

    def hook(module, query, key, layer, st):
        n = query.shape[2]
        kk = key.float().repeat_interleave(query.shape[1] // key.shape[1], 1)
        sc = (query.float() @ kk.transpose(-1, -2)) * module.scaling
        sc = sc.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        rec[layer] = (float(sc.softmax(-1)[0, :, 1, 0].mean()), float((sc[0, :, 1, 0] - sc[0, :, 1, 1]).mean()))

    saved, _sink_mass = _sink_mass, hook
    eot = tok.convert_tokens_to_ids(EOT)
    out = ["| text | config | layer 0 p(1→0), logit(0)−logit(1) | layer 1 | layer 2 | layer 3 | massive activations |",
           "|---|---|---|---|---|---|---|"]
    try:
        for text in ("CHAPTER 1\n\nThe family", "Chapter 1\n\nIt is"):
            ids = torch.tensor([eot] + tok(text, add_special_tokens=False)["input_ids"])
            for name, kw in (("full", {}), ("fp8 sink K only", CONFIGS["fp8 sink K only"]), ("fp8 all", CONFIGS["fp8 all"])):
                rec.clear()
                st = State(mass=True, **kw)
                token_nll(model, ids, st)
                cells = " | ".join(f"{rec[L][0]:.3f}, {rec[L][1]:+.2f}" for L in range(4))
                out.append(f"| {text.split(chr(10))[0]!r} | {name} | {cells} | {st.massive} |")
    finally:
        _sink_mass = saved
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", default="0,1,2,3", help="line indices in docs.jsonl")
    ap.add_argument("--max-tokens", type=int, default=1536, help="document tokens kept (before the prefix)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--configs", default=",".join(c for c in CONFIGS if "only" not in c or "fp8" in c))
    ap.add_argument("--split", type=int, default=512, help="report document-token positions < split and >= split")
    ap.add_argument("--out", default="/tmp/kv_ppl_sink.json")
    ap.add_argument("--merge", nargs="+", help="no forward pass: merge these JSONs (one per --docs run) and print the tables")
    ap.add_argument("--probe", action="store_true", help="only the position-1 -> position-0 attention probe")
    args = ap.parse_args()
    if args.probe:
        from transformers import AutoTokenizer
        print(probe(load_model(args.dtype), AutoTokenizer.from_pretrained(str(MODEL))))
        return
    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        res = {"docs": [d for p in parts for d in p["docs"]]}
        for k in ("nll", "stats", "mass", "logit", "massive", "first"):
            res[k] = {kk: vv for p in parts for kk, vv in p.get(k, {}).items()}
        configs = [c for c in parts[0]["args"]["configs"].split(",") if c]
        Path(args.out).write_text(json.dumps(res))
        print(report(res, configs, parts[0]["args"]["split"]))
        return
    torch.set_grad_enabled(False)

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL))
    eot = tok.convert_tokens_to_ids(EOT)
    lines = open(DOCS).read().splitlines()
    docs = [json.loads(lines[int(i)]) for i in args.docs.split(",")]
    model = load_model(args.dtype)
    configs = [c for c in args.configs.split(",") if c]
    res: dict = {"args": vars(args), "docs": [d["id"] for d in docs], "nll": {}, "stats": {}, "mass": {}, "logit": {}}
    t0 = time.time()
    for d in docs:
        body = tok(d["text"], add_special_tokens=False)["input_ids"][: args.max_tokens]
        for prefix in ("eot", "none"):
            ids = torch.tensor(([eot] if prefix == "eot" else []) + body)
            key = f"{d['id']}|{prefix}"
            # reference: full precision K/V, with sink stats and attention mass
            st = State(measure=True, mass=True)
            nll = token_nll(model, ids, st)
            res.setdefault("massive", {})[f"{key}|ref"] = st.massive
            res.setdefault("first", {})[f"{key}|ref"] = st.attn_first
            res["nll"][f"{key}|ref"] = nll.tolist()
            res["stats"][key] = st.stats
            res["mass"][f"{key}|ref"] = st.attn_mass
            res["logit"][f"{key}|ref"] = st.attn_logit
            for c in configs:
                st = State(mass=True, **CONFIGS[c])
                res["nll"][f"{key}|{c}"] = token_nll(model, ids, st).tolist()
                res.setdefault("massive", {})[f"{key}|{c}"] = st.massive
                res.setdefault("first", {})[f"{key}|{c}"] = st.attn_first
                if st.mass:
                    res["mass"][f"{key}|{c}"] = st.attn_mass
                    res["logit"][f"{key}|{c}"] = st.attn_logit
            print(f"{key}: {len(ids)} tokens, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    Path(args.out).write_text(json.dumps(res))
    print(report(res, configs, args.split))


def _doc_token_nll(res, key, prefix, cfg):
    """NLL per document token j (j = 1 .. n-1; doc token 0 is dropped in both variants so that the same
    tokens are compared), indexed from doc token 1."""
    nll = res["nll"][f"{key}|{prefix}|{cfg}"]
    return nll[1:] if prefix == "eot" else nll  # with the prefix, nll[0] is doc token 0 given <|endoftext|>


def report(res, configs, split) -> str:
    out = []
    docs = res["docs"]
    for prefix, title in (("eot", "`<|endoftext|>` + document"), ("none", "document, no prefix")):
        out.append(f"\n### {title}: mean NLL delta vs full-precision KV (nats/token), and token perplexity\n")
        out.append(f"| config | Δ NLL doc tokens 1-{split - 1} | Δ NLL {split}+ | Δ NLL all | ppl 1-{split - 1} | ppl {split}+ | docs better (1-{split - 1}) |")
        out.append("|---|---|---|---|---|---|---|")
        for cfg in ["ref"] + configs:
            a = b = al = 0.0
            na = nb = 0
            ra = rb = 0.0
            better = 0
            for key in docs:
                x = torch.tensor(_doc_token_nll(res, key, prefix, cfg))
                r = torch.tensor(_doc_token_nll(res, key, prefix, "ref"))
                lo = split - 1
                a += float((x[:lo] - r[:lo]).sum()); na += lo
                b += float((x[lo:] - r[lo:]).sum()); nb += len(x) - lo
                ra += float(x[:lo].sum()); rb += float(x[lo:].sum())
                better += int(float((x[:lo] - r[:lo]).sum()) < 0)
            out.append(f"| {cfg} | {a / na:+.4f} | {b / nb:+.4f} | {(a + b) / (na + nb):+.4f} | "
                       f"{math.exp(ra / na):.2f} | {math.exp(rb / nb):.2f} | {better}/{len(docs)} |")
    # per document: where the massive activations are, and the NLL delta over all scored tokens
    if "massive" in res:
        for prefix in ("eot", "none"):
            out.append(f"\n### Per document, prefix={prefix}: Δ NLL (all doc tokens) and positions with a massive activation "
                       f"(max |h| > {MASSIVE:g} after layer {MASSIVE_LAYER}, position: max |h|)\n")
            out.append("| config | " + " | ".join(docs) + " |")
            out.append("|---|" + "---|" * len(docs))
            for cfg in ["ref"] + configs:
                cells = []
                for key in docs:
                    x = torch.tensor(_doc_token_nll(res, key, prefix, cfg))
                    r = torch.tensor(_doc_token_nll(res, key, prefix, "ref"))
                    m = ", ".join(f"{p}: {v}" for p, v in res["massive"][f"{key}|{prefix}|{cfg}"])
                    cells.append(f"{float((x - r).mean()):+.4f} [{m}]")
                out.append(f"| {cfg} | " + " | ".join(cells) + " |")
        out.append("\n### Attention mass on key positions 0-7 (mean over heads, query positions >= 8, layers 3-22)\n")
        out.append("| prefix | config | " + " | ".join(str(i) for i in range(8)) + " |")
        out.append("|---|---|" + "---|" * 8)
        for prefix in ("eot", "none"):
            for cfg in ["ref"] + configs:
                acc = [0.0] * 8
                n = 0
                for key in docs:
                    f = res["first"].get(f"{key}|{prefix}|{cfg}")
                    if not f:
                        continue
                    for L in range(3, 23):
                        row = f.get(str(L)) or f.get(L)
                        acc = [a + b for a, b in zip(acc, row)]
                        n += 1
                if n:
                    out.append(f"| {prefix} | {cfg} | " + " | ".join(f"{a / n:.3f}" for a in acc) + " |")
    # per-layer sink statistics (with the prefix), averaged over documents
    for prefix in ("eot", "none"):
        out.append(f"\n### K / V at the sink (position 0) vs other positions, scale 1.0, prefix={prefix} (max over documents)\n")
        out.append("| layer | max\\|K\\| sink | max\\|K\\| rest | ‖k‖ sink | ‖k‖ rest | K clipped sink | K rel err sink | K rel err rest | max\\|V\\| sink | max\\|V\\| rest | V rel err sink | V rel err rest |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        layers = sorted(int(k) for k in res["stats"][f"{docs[0]}|{prefix}"])
        for L in layers:
            s = [res["stats"][f"{d}|{prefix}"][str(L)] if str(L) in res["stats"][f"{d}|{prefix}"] else res["stats"][f"{d}|{prefix}"][L] for d in docs]
            mx = lambda k: max(x[k] for x in s)
            mean = lambda k: sum(x[k] for x in s) / len(s)
            out.append(f"| {L} | {mx('k_sink_absmax'):.1f} | {mx('k_rest_absmax'):.1f} | {mean('k_sink_norm'):.1f} | {mean('k_rest_norm'):.1f} | "
                       f"{mx('k_sink_clipped'):.3f} | {mean('k_sink_relerr'):.4f} | {mean('k_rest_relerr'):.4f} | "
                       f"{mx('v_sink_absmax'):.3g} | {mx('v_rest_absmax'):.3g} | {mean('v_sink_relerr'):.4f} | {mean('v_rest_relerr'):.4f} |")
    # attention mass on position 0
    for prefix in ("eot", "none"):
        if f"{docs[0]}|{prefix}|fp8 all" not in res["mass"]:
            continue
        out.append(f"\n### Attention mass on position 0 (mean over 14 heads and query positions >= 1), prefix={prefix}\n")
        out.append("| layer | full precision | FP8 unit (all) | Δ | sink logit − mean other logit, full | FP8 |")
        out.append("|---|---|---|---|---|---|")
        layers = sorted(int(k) for k in res["mass"][f"{docs[0]}|{prefix}|ref"])
        for L in layers:
            g = lambda c, f: sum(f(d, c) for d in docs) / len(docs)
            m0 = g("ref", lambda d, c: res["mass"][f"{d}|{prefix}|{c}"][str(L)] if str(L) in res["mass"][f"{d}|{prefix}|{c}"] else res["mass"][f"{d}|{prefix}|{c}"][L])
            m1 = g("fp8 all", lambda d, c: res["mass"][f"{d}|{prefix}|{c}"][str(L)] if str(L) in res["mass"][f"{d}|{prefix}|{c}"] else res["mass"][f"{d}|{prefix}|{c}"][L])
            lg = lambda c: g(c, lambda d, c: (res["logit"][f"{d}|{prefix}|{c}"].get(str(L)) or res["logit"][f"{d}|{prefix}|{c}"][L])["logit_sink_minus_rest"])
            out.append(f"| {L} | {m0:.4f} | {m1:.4f} | {m1 - m0:+.4f} | {lg('ref'):.2f} | {lg('fp8 all'):.2f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
