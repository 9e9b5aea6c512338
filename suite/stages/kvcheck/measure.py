"""FP8 (E4M3) KV-cache scale check: what each scale option does to the K, V (and Q) that attention sees.

vLLM stores K and V in FP8 E4M3 as ``fp8(x / scale)`` and multiplies by ``scale`` when it reads them
back; with ``kv_cache_dtype: fp8`` on FlashAttention (FA3, Hopper) it quantizes the query too, with
``q_scale`` (1.0 unless the checkpoint carries ``q_scale``: llmcompressor's ``kv_cache_scheme`` writes
only k/v scales). A scale that is too small clips (|x / scale| > 448 saturates); one that is too large
pushes small values into E4M3's subnormal range (|x / scale| < 2**-6), where precision drops, and to 0.

This module measures that on the real activations of a Hugging Face model, with a fake quant
(quantize-dequantize) in the attention function: K after the k_proj bias *and* RoPE, exactly what is
written to the cache (and what llmcompressor's k observer sees: compressed-tensors' ``QuantizedKVCache``
hooks the cache update, which Qwen2/Llama attention calls after ``apply_rotary_pos_emb``).

Scale options (``SCALE_OPTIONS``):
  calibrated  the checkpoint's per-tensor ``k_scale`` / ``v_scale`` (llmcompressor), Q at 1.0
  unit        1.0 for K, V and Q (vLLM's default when the checkpoint has no scales)
  dynamic     per-tensor absmax / 448 of the tensor itself, computed at run time (an ideal per-tensor scale)
  per-head    per-KV-head absmax / 448 at run time (the granularity of vLLM's per-head scales)
  vllm-calc   vLLM's ``calculate_kv_scales``: absmax of the first batch / 200 (Q, K) and / 100 (V), frozen

Thresholds (``Thresholds``), and why:
  clipped_frac > 1e-4   an absmax-derived scale clips nothing on the data it came from, so any clipping
                        means the scale was fitted on smaller values than attention sees; 1e-4 leaves room
                        for a rare outlier token (about one K component in 80 tokens of a 128-wide KV).
  rel_err > 2**-4       0.0625 is the largest relative rounding error of a *normal* E4M3 value (3 mantissa
                        bits); a well-scaled tensor measures ~0.02-0.03. Above 2**-4 the error can only come
                        from clipping or underflow.
  rel_err > 2x median   a layer whose error stands out from the model's other layers under the same option.
  attention error > 1.5x  ('attn' rows) the attention output with K and V in FP8 against BF16, relative to
                        the same layer under the ideal per-tensor scale (absmax at run time, option
                        'dynamic'). Element errors miss what broke Qwen2.5-Coder-0.5B (docs/kv-scales.md): a
                        near-constant, bias-dominated K channel whose value / scale sits on an E4M3 rounding
                        midpoint flips a whole grid step from token to token; its rel err stays ~0.025 but
                        the attention output error rises 1.6x, and KL 50x.
  bias norm > 8x median (``kvbias.kv_bias_preflight``) k_proj / v_proj bias norms of Qwen2/2.5 sit around 10 with a
                        few layers at 150-400 (Qwen2.5-Coder-0.5B: 393, 279, 228, 149 against a median of ~11):
                        those layers' K is dominated by a constant vector that RoPE rotates with position,
                        so its per-tensor range depends on sequence length and position.

torch and transformers are imported inside the functions: importing this module is cheap.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import torch

FP8_E4M3_MAX = 448.0
FP8_E4M3_MIN_NORMAL = 2.0 ** -6
# |x / scale| above this is clipped: values in (448, 464] round to 448 anyway (448 + half its ulp of 32)
FP8_E4M3_CLIP = 464.0
from suite.runtime import safeio
from suite.records.kvcheck import Thresholds  # noqa: E402
SCALE_OPTIONS = ("calibrated", "unit", "dynamic", "per-head", "vllm-calc")
VLLM_CALC_RANGE = {"q": 200.0, "k": 200.0, "v": 100.0}  # vLLM's Q/K/V_SCALE_CONSTANT
HOOK_NAME = "suite_kvcheck"


class ClipStats(NamedTuple):
    clipped_frac: float    # |x / scale| > 464: saturated (448 is E4M3's largest value)
    underflow_frac: float  # nonzero x with |x / scale| < 2**-6: subnormal or flushed to 0
    rel_err: float         # ||x - qdq(x)|| / ||x||


def fp8_e4m3_qdq(x: "torch.Tensor", scale: "torch.Tensor | float") -> "torch.Tensor":
    """Quantize to FP8 E4M3 with ``scale`` (a scalar or a tensor broadcastable to ``x``: per head) and back,
    saturating at +-448 as vLLM's cache kernels do; the result has ``x``'s dtype."""
    import torch

    s = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    q = (x.float() / s).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() * s).to(x.dtype)


@dataclass
class _Acc:
    """Running sums for one (layer, option, tensor): clip/underflow counts and squared norms."""
    n: int = 0
    nonzero: int = 0
    clipped: int = 0
    underflow: int = 0
    err2: float = 0.0
    x2: float = 0.0
    absmax: float = 0.0
    scale_max: float = 0.0

    def add(self, x: "torch.Tensor", scale: "torch.Tensor") -> None:
        import torch

        xf = x.float()
        s = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
        r = (xf / s).abs()
        self.n += xf.numel()
        nz = xf != 0
        self.nonzero += int(nz.sum())
        self.clipped += int((r > FP8_E4M3_CLIP).sum())
        self.underflow += int((nz & (r < FP8_E4M3_MIN_NORMAL)).sum())
        d = xf - fp8_e4m3_qdq(xf, s)
        self.err2 += float((d * d).sum())
        self.x2 += float((xf * xf).sum())
        self.absmax = max(self.absmax, float(xf.abs().max()))
        self.scale_max = max(self.scale_max, float(s.max()))

    def add_error(self, ref: "torch.Tensor", out: "torch.Tensor") -> None:
        """Accumulate ||out - ref||^2 and ||ref||^2 only (the attention-output rows)."""
        d = out.float() - ref.float()
        self.n += ref.numel()
        self.err2 += float((d * d).sum())
        self.x2 += float((ref.float() ** 2).sum())
        self.absmax = max(self.absmax, float(ref.abs().max()))

    def stats(self) -> ClipStats:
        return ClipStats(self.clipped / self.n if self.n else 0.0,
                         self.underflow / self.nonzero if self.nonzero else 0.0,
                         math.sqrt(self.err2 / self.x2) if self.x2 else 0.0)


def clip_stats(x: "torch.Tensor", scale: "torch.Tensor | float") -> ClipStats:
    """Clipped fraction, underflow fraction and relative error of ``x`` in FP8 E4M3 under ``scale``."""
    acc = _Acc()
    acc.add(x, scale)
    return acc.stats()


# ----- scales -----

def read_kv_scales(model_dir: str | Path) -> dict[int, dict[str, float]]:
    """{layer: {"k": k_scale, "v": v_scale[, "q": q_scale]}} from a checkpoint's safetensors headers
    and the scale tensors only (no model load). Empty when the checkpoint has none."""
    from safetensors import safe_open

    out: dict[int, dict[str, float]] = {}
    rx = re.compile(r"layers\.(\d+)\..*\.([kvq])_scale$")
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(safeio.regular(f, "weights"), "pt") as st:
            for key in st.keys():
                m = rx.search(key)
                if m:
                    t = st.get_tensor(key)
                    out.setdefault(int(m.group(1)), {})[m.group(2)] = float(t.float().reshape(-1).max())
    return out


def option_scale(option: str, kind: str, x: "torch.Tensor", layer: int,
                 calibrated: dict[int, dict[str, float]], frozen: dict[int, dict[str, float]]) -> "torch.Tensor":
    """The scale ``option`` gives tensor ``kind`` ('q', 'k', 'v'; shape (batch, heads, seq, head_dim)) of
    ``layer``: a scalar tensor, or (1, heads, 1, 1) for per-head."""
    import torch

    if option == "unit":
        return torch.tensor(1.0)
    if option == "calibrated":
        # Q: vLLM uses the checkpoint's q_scale, else 1.0 (llmcompressor's kv_cache_scheme writes none)
        return torch.tensor(calibrated.get(layer, {}).get(kind, 1.0))
    if option == "dynamic":
        return (x.detach().float().abs().amax() / FP8_E4M3_MAX).clamp_min(1e-12)
    if option == "per-head":
        return (x.detach().float().abs().amax(dim=(0, 2, 3), keepdim=True) / FP8_E4M3_MAX).clamp_min(1e-12)
    if option == "vllm-calc":
        return torch.tensor(frozen[layer][kind])
    raise ValueError(f"unknown KV scale option {option!r} (one of {', '.join(SCALE_OPTIONS)})")


# ----- the attention hook -----

@dataclass
class _Hook:
    """State of the fake-quant attention function: what to measure, what to quantize."""
    options: Sequence[str] = ()
    calibrated: dict[int, dict[str, float]] = field(default_factory=dict)
    frozen: dict[int, dict[str, float]] = field(default_factory=dict)
    measure: bool = False
    acc: dict[tuple[int, str, str], _Acc] = field(default_factory=dict)
    absmax: dict[int, dict[str, float]] = field(default_factory=dict)
    quantize: str | None = None          # option applied to K, V in the forward
    quantize_q: bool = False             # FlashAttention-style: Q in FP8 too
    skip_layers: frozenset[int] = frozenset()
    kinds: frozenset[str] = frozenset({"k", "v"})  # which of K, V the forward quantizes


_STATE: _Hook | None = None


def _attention(module, query, key, value, attention_mask, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    st = _STATE
    layer = int(getattr(module, "layer_idx", -1))
    if st is not None:
        tensors = {"q": query, "k": key, "v": value}
        am = st.absmax.setdefault(layer, {})
        for kind, x in tensors.items():
            am[kind] = max(am.get(kind, 0.0), float(x.detach().float().abs().max()))
        if st.measure:
            ref = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)[0]
            for option in st.options:
                scales = {}
                for kind, x in tensors.items():
                    if kind == "q" and option == "calibrated":
                        continue  # same as unit for Q
                    scales[kind] = s = option_scale(option, kind, x, layer, st.calibrated, st.frozen)
                    st.acc.setdefault((layer, option, kind), _Acc()).add(x, s)
                # what attention returns with K and V in FP8 (Q in BF16): the error that reaches the model
                out = sdpa_attention_forward(module, query, fp8_e4m3_qdq(key, scales["k"]),
                                             fp8_e4m3_qdq(value, scales["v"]), attention_mask, **kwargs)[0]
                st.acc.setdefault((layer, option, "attn"), _Acc()).add_error(ref, out)
        if st.quantize and layer not in st.skip_layers:
            opt = st.quantize
            if "k" in st.kinds:
                key = fp8_e4m3_qdq(key, option_scale(opt, "k", key, layer, st.calibrated, st.frozen))
            if "v" in st.kinds:
                value = fp8_e4m3_qdq(value, option_scale(opt, "v", value, layer, st.calibrated, st.frozen))
            if st.quantize_q:
                query = fp8_e4m3_qdq(query, option_scale(opt, "q", query, layer, st.calibrated, st.frozen))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def load_hooked_model(model_dir: str | Path):
    """The model in its own dtype, on CPU or the GPU, with every attention call going through the
    fake-quant hook (a registered attention implementation wrapping SDPA)."""
    import torch
    from transformers import AttentionInterface, AutoModelForCausalLM
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(HOOK_NAME, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(HOOK_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto", attn_implementation=HOOK_NAME)
    if torch.cuda.is_available():
        model = model.cuda()
    return model.eval()


def _forward(model, ids: "torch.Tensor", state: _Hook | None) -> "torch.Tensor":
    import torch

    global _STATE
    _STATE = state
    try:
        with torch.inference_mode():
            return model(input_ids=ids.to(model.device), use_cache=False).logits[0].float()
    finally:
        _STATE = None


def _token_batches(model_dir: str | Path, texts: Iterable[str], max_tokens: int) -> list["torch.Tensor"]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return [tok(t, return_tensors="pt", truncation=True, max_length=max_tokens)["input_ids"] for t in texts]


def _vllm_calc_scales(model, first: "torch.Tensor") -> dict[int, dict[str, float]]:
    st = _Hook()
    _forward(model, first, st)
    return {layer: {k: v / VLLM_CALC_RANGE[k] for k, v in am.items()} for layer, am in st.absmax.items()}


@dataclass
class LayerRow:
    layer: int
    option: str
    tensor: str  # 'q', 'k', 'v', or 'attn': the attention output with K and V in FP8 (rel_err only)
    absmax: float
    scale: float  # the largest scale used (per-head: the largest head's; dynamic: the largest call's)
    clipped_frac: float
    underflow_frac: float
    rel_err: float
    flags: list[str] = field(default_factory=list)


def kv_scale_report(model_dir: str | Path, texts: Sequence[str], options: Sequence[str] = SCALE_OPTIONS,
                    scales_dir: str | Path | None = None, max_tokens: int = 2048,
                    thresholds: Thresholds = Thresholds(), model=None) -> list[LayerRow]:
    """Per layer x option x tensor (q, k, v): clipped and underflow fractions and relative error in FP8
    E4M3, measured on the model's real attention inputs over ``texts`` (BF16 forward, nothing quantized).
    ``scales_dir``: the checkpoint holding the calibrated k/v scales (default ``model_dir``). Rows past a
    threshold carry ``flags``."""
    unknown = [o for o in options if o not in SCALE_OPTIONS]
    if unknown:
        raise ValueError(f"unknown KV scale option(s) {unknown} (one of {', '.join(SCALE_OPTIONS)})")
    calibrated = read_kv_scales(scales_dir or model_dir)
    if "calibrated" in options and not calibrated:
        raise ValueError(f"{scales_dir or model_dir}: no k_scale/v_scale in the checkpoint for option 'calibrated'")
    model = model if model is not None else load_hooked_model(model_dir)
    batches = _token_batches(model_dir, texts, max_tokens)
    frozen = _vllm_calc_scales(model, batches[0]) if "vllm-calc" in options else {}
    st = _Hook(options=tuple(options), calibrated=calibrated, frozen=frozen, measure=True)
    for ids in batches:
        _forward(model, ids, st)
    rows = [LayerRow(layer, option, kind, acc.absmax, acc.scale_max, *acc.stats())
            for (layer, option, kind), acc in sorted(st.acc.items())]
    flag_rows(rows, thresholds)
    return rows


def flag_rows(rows: list[LayerRow], thresholds: Thresholds = Thresholds()) -> list[LayerRow]:
    """Set each row's flags: clipping, absolute error past E4M3's rounding bound, error far above the
    median layer's for the same option and tensor; for 'attn' rows, an attention-output error more than
    ``max_attn_err_vs_dynamic`` x that of the ideal per-tensor scale (option 'dynamic') in the same layer."""
    groups: dict[tuple[str, str], list[LayerRow]] = {}
    dynamic_attn = {r.layer: r.rel_err for r in rows if r.tensor == "attn" and r.option == "dynamic"}
    for r in rows:
        groups.setdefault((r.option, r.tensor), []).append(r)
    for (option, tensor), group in groups.items():
        if tensor == "attn":
            for r in group:
                r.flags = []
                ideal = dynamic_attn.get(r.layer)
                if option != "dynamic" and ideal and r.rel_err > thresholds.max_attn_err_vs_dynamic * ideal:
                    r.flags.append(f"attention error {r.rel_err / ideal:.1f}x the ideal per-tensor scale's")
            continue
        median = statistics.median(r.rel_err for r in group)
        for r in group:
            r.flags = []
            if r.clipped_frac > thresholds.max_clipped_frac:
                r.flags.append(f"clips {r.clipped_frac:.2e} > {thresholds.max_clipped_frac:g}")
            if r.rel_err > thresholds.max_rel_err:
                r.flags.append(f"rel err {r.rel_err:.3f} > {thresholds.max_rel_err:.4f}")
            if median > 0 and r.rel_err > thresholds.max_rel_err_vs_median * median:
                r.flags.append(f"rel err {r.rel_err / median:.1f}x the median layer's")
    return rows


@dataclass
class KLResult:
    option: str
    quantize_q: bool
    skip_layers: list[int]
    kl: float          # mean over tokens of KL(P_bf16 || P_fp8kv), nats
    nll: float         # mean next-token NLL with FP8 KV, nats
    nll_bf16: float
    ppl: float
    ppl_bf16: float
    top1_agree: float  # fraction of positions where the argmax token is unchanged
    tokens: int


def kv_fake_quant_kl(model_dir: str | Path, texts: Sequence[str], option: str, skip_layers: Iterable[int] = (),
                     quantize_q: bool = False, scales_dir: str | Path | None = None, max_tokens: int = 2048,
                     model=None, reference: list["torch.Tensor"] | None = None,
                     kinds: Iterable[str] = ("k", "v")) -> KLResult:
    """KL(BF16 || fake-quant FP8 KV under ``option``) and perplexity on ``texts``; ``skip_layers`` keep their
    KV in BF16 (vLLM's ``kv_cache_dtype_skip_layers``); ``quantize_q``: Q in FP8 too (FlashAttention).
    ``reference``: BF16 log-probs per text from an earlier call (saves the BF16 forward); ``kinds``: quantize
    only K or only V."""
    import torch

    model = model if model is not None else load_hooked_model(model_dir)
    calibrated = read_kv_scales(scales_dir or model_dir) if option == "calibrated" else {}
    if option == "calibrated" and not calibrated:
        raise ValueError(f"{scales_dir or model_dir}: no k_scale/v_scale in the checkpoint")
    batches = _token_batches(model_dir, texts, max_tokens)
    frozen = _vllm_calc_scales(model, batches[0]) if option == "vllm-calc" else {}
    st = _Hook(calibrated=calibrated, frozen=frozen, quantize=option, quantize_q=quantize_q,
               skip_layers=frozenset(skip_layers), kinds=frozenset(kinds))
    kl = nll = nll0 = agree = 0.0
    n = 0
    for i, ids in enumerate(batches):
        ref = reference[i] if reference is not None else torch.log_softmax(_forward(model, ids, None), -1)
        lq = torch.log_softmax(_forward(model, ids, st), -1)
        tgt = ids[0, 1:].to(lq.device)
        kl += float((ref.exp() * (ref - lq)).sum(-1)[:-1].sum())
        nll += float(-lq[:-1].gather(-1, tgt[:, None]).sum())
        nll0 += float(-ref[:-1].gather(-1, tgt[:, None]).sum())
        agree += float((ref[:-1].argmax(-1) == lq[:-1].argmax(-1)).sum())
        n += tgt.numel()
    return KLResult(option, quantize_q, sorted(set(skip_layers)), kl / n, nll / n, nll0 / n,
                    math.exp(nll / n), math.exp(nll0 / n), agree / n, n)


def bf16_reference(model, model_dir: str | Path, texts: Sequence[str], max_tokens: int = 2048) -> list["torch.Tensor"]:
    """BF16 log-probs per text, to pass as ``reference`` to several ``kv_fake_quant_kl`` calls."""
    import torch

    return [torch.log_softmax(_forward(model, ids, None), -1) for ids in _token_batches(model_dir, texts, max_tokens)]


# ----- pre-flight -----

def format_rows(rows: Sequence[LayerRow]) -> str:
    """A Markdown table of ``kv_scale_report`` rows."""
    out = ["| layer | option | tensor | absmax | scale | clipped | underflow | rel err | flags |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.layer} | {r.option} | {r.tensor} | {r.absmax:.3g} | {r.scale:.3g} | {r.clipped_frac:.2e} | "
                   f"{r.underflow_frac:.2e} | {r.rel_err:.4f} | {'; '.join(r.flags)} |")
    return "\n".join(out)
