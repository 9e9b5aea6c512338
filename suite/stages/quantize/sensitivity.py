"""Sensitivity sweep: which decoder layers does FP8 hurt most? Data for ``quantization.ignore``.

``suite sensitivity RECIPE --variant NAME`` (runs in the quantize environment, as a stage process):
quantize one decoder layer — or a block of ``block`` consecutive layers — at a time with the variant's
scheme, and measure on held-out calibration text (rows of the variant's calibration set that
calibration did not use) how far the model's next-token distributions move from BF16's: the mean
KL(BF16 || quantized) per token, and the perplexity. The quantization is compressed-tensors' own
quantize-dequantize with the scheme's preset arguments (``preset_name_to_scheme``: FP8 = per-tensor
weights and static per-tensor activations, whose scale is observed over the held-out text first;
FP8_DYNAMIC = per-channel weights, per-token activations), applied to every ``Linear`` of the layer.

The result ranks the layers and suggests which to keep in BF16: the few whose KL stands out (at least
twice the median and in the top ``suggest``), as ``re:`` entries for ``quantization.ignore``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from statistics import median

from suite.records.quantize import SensitivityConfig, SensitivityResult
from suite.stages.quantize import calibration
from suite.stages.quantize.stage import load_base_model


def _minmax(t, reduce_dims):
    if reduce_dims is None:
        return t.amin().reshape(1).float(), t.amax().reshape(1).float()
    return t.amin(dim=reduce_dims, keepdim=True).float(), t.amax(dim=reduce_dims, keepdim=True).float()


def qdq(t, args, mn, mx):
    """compressed-tensors' quantize-dequantize of ``t`` with the range [mn, mx]."""
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize
    from compressed_tensors.quantization.utils import calculate_qparams

    scale, zp = calculate_qparams(mn, mx, args)
    return fake_quantize(t, scale, zp, args).to(t.dtype)


def decoder_layers(model):
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return list(obj)
        except AttributeError:
            continue
    raise ValueError("cannot find the decoder layers of this model (model.layers, transformer.h, ...)")


@contextmanager
def quantized(linears, scheme, act_ranges):
    """Weights replaced by their QDQ copies and inputs QDQ'd by a pre-hook, undone on exit."""
    import torch

    saved, hooks = [], []
    w_args, a_args = scheme.weights, scheme.input_activations
    w_dims = None if w_args.strategy == "tensor" else 1  # channel: one range per output row
    for name, lin in linears:
        saved.append((lin, lin.weight.data))
        with torch.no_grad():
            lin.weight.data = qdq(lin.weight.data, w_args, *_minmax(lin.weight.data, w_dims))
        if a_args is None:
            continue
        if a_args.dynamic:  # per token
            hooks.append(lin.register_forward_pre_hook(
                lambda m, a: (qdq(a[0], a_args, *_minmax(a[0], -1)), *a[1:])))
        else:  # static per tensor: the range observed over the held-out text
            mn, mx = act_ranges[name]
            hooks.append(lin.register_forward_pre_hook(
                lambda m, a, mn=mn, mx=mx: (qdq(a[0], a_args, mn, mx), *a[1:])))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
        for lin, w in saved:
            lin.weight.data = w


def observe_ranges(model, linears, batches):
    """Global min/max of each Linear's input over the texts (the static_minmax observer)."""
    import torch

    ranges, hooks = {}, []
    for name, lin in linears:
        def hook(m, a, name=name):
            mn, mx = _minmax(a[0], None)
            old = ranges.get(name)
            ranges[name] = (mn, mx) if old is None else (torch.minimum(old[0], mn), torch.maximum(old[1], mx))
        hooks.append(lin.register_forward_pre_hook(hook))
    with torch.no_grad():
        for ids in batches:
            model(ids)
    for h in hooks:
        h.remove()
    return ranges


def score(model, batches, reference):
    """Mean KL(reference || model) per token, and the model's perplexity on the texts."""
    import torch
    import torch.nn.functional as F

    kl_sum, nll_sum, n = 0.0, 0.0, 0
    with torch.no_grad():
        for ids, ref in zip(batches, reference):
            logp = F.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
            ref = ref.float()
            kl_sum += float((ref.exp() * (ref - logp)).sum())
            nll_sum += float(-logp.gather(-1, ids[0, 1:, None]).sum())
            n += ids.shape[1] - 1
    return kl_sum / n, float(torch.exp(torch.tensor(nll_sum / n)))


def run(config: SensitivityConfig) -> SensitivityResult:
    start = time.perf_counter()
    import torch
    from compressed_tensors.quantization import preset_name_to_scheme
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    model = load_base_model(config.model, config.revision, config.random_weights)
    tokenizer = AutoTokenizer.from_pretrained(config.model, revision=config.revision)
    used = set(calibration.load_texts(config.calibration, config.skip_samples, tokenizer)) if config.skip_samples else set()
    pool = calibration.load_texts(config.calibration, config.skip_samples + 4 * config.num_samples, tokenizer)
    texts = [t for t in pool if t not in used][:config.num_samples]
    if not texts:
        raise ValueError(f"calibration set {config.calibration!r} has no rows left after the {config.skip_samples} "
                         "used for calibration")
    device = next(model.parameters()).device
    batches = [tokenizer(t, return_tensors="pt", truncation=True, max_length=config.max_seq_length,
                         add_special_tokens=False)["input_ids"].to(device) for t in texts]
    batches = [b for b in batches if b.shape[1] > 1]
    with torch.no_grad():
        reference = [torch.log_softmax(model(b).logits[0, :-1].float(), dim=-1).to(torch.bfloat16) for b in batches]
    base_kl, base_ppl = score(model, batches, reference)

    scheme = preset_name_to_scheme(config.scheme, ["Linear"])
    layers = decoder_layers(model)
    named = {m: n for n, m in model.named_modules()}
    linears_of = [[(named[m], m) for m in layer.modules() if isinstance(m, torch.nn.Linear)] for layer in layers]
    all_linears = [x for ls in linears_of for x in ls]
    static = scheme.input_activations is not None and not scheme.input_activations.dynamic
    act_ranges = observe_ranges(model, all_linears, batches) if static else {}

    rows = []
    for first in range(0, len(layers), config.block):
        idx = list(range(first, min(first + config.block, len(layers))))
        lins = [x for i in idx for x in linears_of[i]]
        with quantized(lins, scheme, act_ranges):
            kl, ppl = score(model, batches, reference)
        rows.append({"layers": idx, "kl": kl, "ppl": ppl, "ppl_delta": ppl - base_ppl})
    with quantized(all_linears, scheme, act_ranges):
        all_kl, all_ppl = score(model, batches, reference)

    ranked = sorted(rows, key=lambda r: r["kl"], reverse=True)
    cut = 2 * median(r["kl"] for r in rows)
    suggest = [r for r in ranked[:config.suggest] if r["kl"] >= cut and r["kl"] > 0]
    ignore = [rf"re:.*layers\.{i}\..*" for r in suggest for i in r["layers"]]
    return SensitivityResult(
        scheme=config.scheme, num_texts=len(batches), tokens=sum(b.shape[1] - 1 for b in batches),
        baseline_ppl=base_ppl, baseline_kl=base_kl, all_layers_kl=all_kl, all_layers_ppl=all_ppl, ranked=ranked,
        suggested_ignore=ignore, wall_s=time.perf_counter() - start,
    )
