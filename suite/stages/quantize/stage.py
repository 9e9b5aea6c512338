"""Quantize stage: llmcompressor ``oneshot`` + ``QuantizationModifier`` -> a compressed-tensors checkpoint.

Runs in the quantize environment (``python -m suite.stages quantize``). The checkpoint folder is
content-addressed (``QuantizeConfig.key``): a finished one is found by the run's lookup before this stage is
started (``runtime.ckptfiles.lookup``, asked again here), and a checkpoint is written to a temporary folder and
renamed only when complete and checked, so a half-written one is never found.
After saving, the stage checks that what was asked for is really in the files: the scheme in
``config.json``, and k/v scales in the weights when an FP8 KV cache was calibrated (vLLM silently
uses scale 1.0 when they are missing).
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from suite.runtime.ckptfiles import COMPLETE_MARK, RESULT_FILE, content_sha256, is_complete
from suite.records.quantize import QuantizeConfig, QuantizeResult
from suite.records.schemes import scheme_in_config
from suite.runtime import ckptfiles, progress, safeio
from suite.runtime.envs import package_versions
from suite.stages.quantize import calibration

log = logging.getLogger(__name__)
KV_CACHE_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def run(config: QuantizeConfig) -> QuantizeResult:
    final = Path(config.checkpoint_dir)
    if (found := ckptfiles.lookup(final, config.key)) is not None:  # the run's own lookup, asked again here
        log.info("checkpoint %s is complete: reused", final)
        return found
    if (aside := ckptfiles.set_aside(final)) is not None:  # complete, but not what its key says: built again
        log.warning("checkpoint %s is not the one its key names: removed (%s), built again", final, aside)

    start = time.perf_counter()
    import torch
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    model = load_model(config)
    tokenizer = AutoTokenizer.from_pretrained(config.model, revision=config.revision)
    ignore = expand_ignore(config.ignore, model.config.num_hidden_layers)
    check_ignore_patterns(ignore, [(n, type(m).__name__) for n, m in model.named_modules()])

    modifier_args = {}
    if config.scheme:
        modifier_args.update(targets="Linear", scheme=config.scheme, ignore=ignore)
    if config.kv_cache == "fp8":
        modifier_args["kv_cache_scheme"] = {**KV_CACHE_SCHEME,
                                             **({"strategy": config.kv_cache_strategy} if config.kv_cache_strategy else {})}
    recipe = [QuantizationModifier(**modifier_args)]
    if config.smoothing_strength is not None:
        from llmcompressor.modifiers.smoothquant import SmoothQuantModifier

        recipe.insert(0, SmoothQuantModifier(smoothing_strength=config.smoothing_strength))

    dataset = None
    if config.calibration:
        from datasets import Dataset

        texts = calibration.load_mix(config.calibration, config.num_calibration_samples, tokenizer)
        ids = [tokenizer(t, add_special_tokens=False, truncation=True, max_length=config.max_seq_length)["input_ids"]
               for t in texts]
        dataset = Dataset.from_dict({"input_ids": ids})

    t_cal = time.perf_counter()
    counting = count_passes(model, len(dataset) if dataset is not None else 0)
    try:
        oneshot(model=model, recipe=recipe, dataset=dataset,
                num_calibration_samples=len(dataset) if dataset is not None else config.num_calibration_samples,
                max_seq_length=config.max_seq_length)
    finally:
        for h in counting:
            h.remove()
    calibration_s = time.perf_counter() - t_cal

    remove_stale_partials(final)
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    with partial_checkpoint(tmp):
        return _write_and_finalize(model, tokenizer, tmp, final, config, start, calibration_s)


def _write_and_finalize(model, tokenizer, tmp: Path, final: Path, config: QuantizeConfig, start: float,
                        calibration_s: float) -> QuantizeResult:
    """Save the quantized model to ``tmp``, check it, record how it was made and rename it to ``final``."""
    import torch

    model.save_pretrained(tmp, save_compressed=True)
    tokenizer.save_pretrained(tmp)

    qcfg = safeio.read_json(tmp / "config.json", "model_config").get("quantization_config") or {}
    kv_scales = count_kv_scales(tmp)
    n_layers = getattr(model.config, "num_hidden_layers", 0)
    problems = verify_checkpoint(qcfg, kv_scales, n_layers, config)
    if problems:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError("checkpoint check failed: " + "; ".join(problems))

    result = QuantizeResult(
        checkpoint=str(final), key=config.key, cache_hit=False, wall_s=0.0, calibration_s=calibration_s,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        quantization_config=qcfg, kv_cache_scales=kv_scales, ignored_modules=list(qcfg.get("ignore") or []),
        versions=package_versions(),
        content_sha256=content_sha256(tmp),
    )
    result.wall_s = time.perf_counter() - start
    provenance = {**config.provenance, "key": config.key, "created": datetime.now(timezone.utc).isoformat(),
                  "versions": result.versions, "device": "cuda" if torch.cuda.is_available() else "cpu",
                  "config": config.model_dump()}
    (tmp / "provenance.json").write_text(json.dumps(provenance, indent=2))
    result.write(tmp / RESULT_FILE)
    (tmp / COMPLETE_MARK).write_text(config.key)
    if not finalize(tmp, final):  # another process finished the same checkpoint first: use it
        kept = QuantizeResult.read(final / RESULT_FILE)
        log.info("checkpoint %s was finished by another process first: using it", final)
        return kept.model_copy(update={"cache_hit": True, "wall_s": result.wall_s, "calibration_s": calibration_s})
    log.info("checkpoint %s written in %.1f s", final, result.wall_s)
    return result


@contextmanager
def partial_checkpoint(tmp: Path):
    """The temporary folder a checkpoint is written to, removed when anything fails before it is renamed into
    place (a full disk, a failed check, an interrupt): a partial ``...tmp-PID`` folder is never left behind."""
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_stale_partials(final: Path) -> list[Path]:
    """Remove the ``<final>.tmp-PID`` folders of writers that are gone (a process killed outright cannot
    clean up after itself); a live writer's folder is left alone. Returns what was removed."""
    removed = []
    for tmp in final.parent.glob(final.name + ".tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def finalize(tmp: Path, final: Path) -> bool:
    """Put the complete checkpoint ``tmp`` at ``final`` with one atomic rename. A complete checkpoint
    already at ``final`` is never deleted or replaced (a reader may be loading it; the key is the
    content's, so it is the same checkpoint): ``tmp`` is discarded and False returned. An incomplete
    leftover at ``final`` (a crash before the rename of an older layout) is moved aside first."""
    for _ in range(5):
        try:
            os.rename(tmp, final)  # atomic; fails while a (non-empty) folder is there
            return True
        except OSError:
            pass
        if is_complete(final):  # a concurrent or earlier writer of the same content got there first
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        # an incomplete leftover (only a crash of an older layout makes one: this one renames only
        # complete folders, and readers need COMPLETE_MARK): move it out of the way and try again
        aside = final.with_name(f"{final.name}.stale-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.rename(final, aside)
        except OSError:
            continue
        if is_complete(aside):  # completed in between by another writer: put it back
            try:
                os.rename(aside, final)
                continue
            except OSError:
                pass
        shutil.rmtree(aside, ignore_errors=True)
    raise RuntimeError(f"could not put the checkpoint at {final}: it keeps changing under us")


def load_model(config: QuantizeConfig):
    return load_base_model(config.model, config.revision, config.random_weights)


def load_base_model(model: str, revision: str | None = None, random_weights: bool = False):
    """The model to quantize: its weights, or (``random_weights``) a model built from config.json with
    random BF16 weights, on the GPU when there is one (an 8B model initialises in seconds there)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if not random_weights:
        return AutoModelForCausalLM.from_pretrained(model, revision=revision, dtype="auto")
    model_config = AutoConfig.from_pretrained(model, revision=revision)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(model_config, dtype=torch.bfloat16)
    return model.eval()


SHORTHAND = re.compile(r"^(first|last):\s*(\d+)$")


def expand_ignore(ignore: list[str], num_layers: int) -> list[str]:
    """Shorthands -> llmcompressor ignore entries: 'first: N' / 'last: N' decoder layers become
    're:' patterns on the layer index; module names, 're:' patterns and class names pass through."""
    out = []
    for entry in ignore:
        m = SHORTHAND.match(entry.strip())
        if not m:
            out.append(entry)
            continue
        n = int(m.group(2))
        if n > num_layers:
            raise ValueError(f"quantization.ignore {entry!r}: the model has {num_layers} decoder layers")
        idx = range(n) if m.group(1) == "first" else range(num_layers - n, num_layers)
        out += [rf"re:.*layers\.{i}\..*" for i in idx]
    return out


def check_ignore_patterns(ignore: list[str], modules: list[tuple[str, str]]) -> None:
    """Every ignore entry must match a module (by name, 're:' pattern or class name): a typo would
    silently quantize a layer meant to stay in BF16."""
    unmatched = []
    for pattern in ignore:
        if pattern.startswith("re:"):
            rx = re.compile(pattern[3:])
            hit = any(rx.match(n) for n, _ in modules)
        else:
            hit = any(n == pattern or n.endswith("." + pattern) or cls == pattern for n, cls in modules)
        if not hit:
            unmatched.append(pattern)
    if unmatched:
        raise ValueError(f"quantization.ignore entries match no module of the model: {unmatched}")


def count_kv_scales(folder: Path) -> int:
    from safetensors import safe_open

    n = 0
    for f in folder.glob("*.safetensors"):
        with safe_open(safeio.regular(f, "weights"), "pt") as st:
            n += sum(1 for k in st.keys() if k.endswith((".k_scale", ".v_scale")))
    return n


def verify_checkpoint(qcfg: dict, kv_scales: int, n_layers: int, config: QuantizeConfig) -> list[str]:
    problems = []
    if qcfg.get("quant_method") != "compressed-tensors":
        problems.append("config.json has no compressed-tensors quantization_config")
    if config.scheme:
        groups = qcfg.get("config_groups") or {}
        if not groups:
            problems.append(f"scheme {config.scheme} requested but config.json has no config_groups")
        for g in groups.values():
            w = g.get("weights") or {}
            if w.get("type") != "float" or w.get("num_bits") != 8:
                problems.append(f"weights are not 8-bit float: {w}")
        found = scheme_in_config(qcfg) if groups else None
        if groups and found != config.scheme:  # the scheme table's weights/activations, read back from the files
            problems.append(f"scheme {config.scheme} requested but config.json's groups read as {found or 'no known scheme'}")
    if config.kv_cache:
        if not qcfg.get("kv_cache_scheme"):
            problems.append("kv_cache requested but config.json has no kv_cache_scheme")
        if kv_scales < 2 * n_layers:
            problems.append(f"expected {2 * n_layers} k/v scales in the weights, found {kv_scales}")
    return problems


def count_passes(model, samples: int) -> list:
    """Forward pre-hooks on the model's decoder layers that report calibration progress (suite.runtime.progress):
    every sample passes every layer once, in whichever order llmcompressor's pipeline runs them, so the count is
    sample-layer passes of ``samples x layers``. Each layer counts at most ``samples``: llmcompressor's sequential
    pipeline runs every layer twice per sample (its "Calibrating" pass, then "Propagating" the outputs to the next
    layer with its own hooks off), which counted to the total at half the work (seen on the demo's fp8-kv variant,
    2026-12-05). Returns the hooks (``.remove()`` them after); none when the model has no ``layers`` list. A traced
    pass (proxies, not tensors) is not counted."""
    import torch

    layers = next((m for name, m in model.named_modules()
                   if name.split(".")[-1] == "layers" and isinstance(m, torch.nn.ModuleList)), None)
    if layers is None or not samples or not len(layers):
        return []
    total, per_layer = samples * len(layers), {}
    what = f"calibration passes ({samples} samples x {len(layers)} layers)"

    def hook(module, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        if isinstance(x, torch.Tensor) and not x.is_meta:
            seen = per_layer.get(id(module), 0)
            if seen < samples:
                per_layer[id(module)] = min(samples, seen + (x.shape[0] if x.dim() > 2 else 1))
                progress.update(what, sum(per_layer.values()), total)

    return [layer.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers]
