"""`suite sensitivity`: the per-layer sweep, run as a stage process in the quantize environment."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from suite.cli.render import _console, _wide_console
from suite.orchestrate.jobs import run_stage
from suite.plan.configs import absolute_calibration, kvcheck_config
from suite.plan.planner import make_plan
from suite.recipe import kv, load_recipe
from suite.records.quantize import SensitivityConfig
from suite.records.schemes import SCHEMES
from suite.runtime.envs import stage_env
from suite.runtime.errors import EXIT_BAD_INPUT, EXIT_OK, Problem, SuiteError
from suite.stages.quantize import calibration
from suite.stages.registry import KVCHECK, QUANTIZE


def first_calibration_set(loaded, calib) -> str:
    """The sweep draws its held-out texts from one set: the variant's (the first of a mix)."""
    calib = absolute_calibration(loaded, calib)
    return calibration.mix_parts(calib)[0][0] if calib else "chat-demo"



def _run(what: str, stage: str, cfg, out: Path, r):
    """One stage process in the quantize environment, under a status line: (result, wall s), or (None, wall)
    after printing the stage's error line."""
    with _console().status(what):
        res, error, wall, note = run_stage(stage, cfg, out, stage_env(dict(r.runtime.env)))
    if note:
        print(f"warning: {note}", file=sys.stderr)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return None, wall
    return res, wall


def cmd_sensitivity(args) -> int:
    from rich.table import Table

    loaded = load_recipe(args.recipe, serving=False)  # nothing is served: FP8 schemes are fine on CPU here
    r = loaded.recipe
    by_name = {v.name: v for v in r.variants}
    if args.variant not in by_name:
        raise SuiteError(Problem(str(loaded.path), "variants", f"no variant named {args.variant!r}",
                                 f"use one of: {', '.join(by_name)}"))
    if getattr(args, "kv", False):
        return cmd_sensitivity_kv(args, loaded, by_name[args.variant])
    q = by_name[args.variant].quantization

    sweepable = [name for name, s in SCHEMES.items() if s.sensitivity]
    if q is None or q.scheme not in sweepable:
        raise SuiteError(Problem(str(loaded.path), f"variants[{args.variant}].quantization.scheme",
                                 f"the sweep needs a weight scheme it can quantize layer by layer: {' or '.join(sweepable)}",
                                 "pick such a variant"))
    cfg = SensitivityConfig(model=loaded.model_path(), revision=r.model.revision, random_weights=r.model.weights == "random",
                            scheme=q.scheme, calibration=args.calibration or first_calibration_set(loaded, q.calibration),
                            skip_samples=q.num_calibration_samples if q.calibration else 0,
                            num_samples=8 if args.samples is None else args.samples,
                            max_seq_length=256 if args.max_seq_length is None else args.max_seq_length,
                            block=args.block)
    out = Path(args.out or loaded.resolve(r.output_dir) / "sensitivity") / f"{r.name}-{args.variant}-{time.strftime('%Y%m%d-%H%M%S')}"
    res, wall = _run(f"sensitivity sweep of {args.variant} ({q.scheme}) in the quantize environment", "sensitivity",
                     cfg, out, r)
    if res is None:
        return EXIT_BAD_INPUT
    table = Table(title=f"{r.name}/{args.variant}: {q.scheme} one block at a time ({res.num_texts} held-out texts, "
                        f"{res.tokens} tokens; BF16 perplexity {res.baseline_ppl:.3f})")
    for col in ("rank", "layers", "KL(BF16 || FP8) / token", "perplexity", "Δ perplexity"):
        table.add_column(col, justify="right")
    for i, row in enumerate(res.ranked[:args.top], 1):
        table.add_row(str(i), ",".join(map(str, row["layers"])), f"{row['kl']:.5f}", f"{row['ppl']:.3f}",
                      f"{row['ppl_delta']:+.3f}")
    _wide_console().print(table)
    print(f"all layers quantized: KL {res.all_layers_kl:.5f}, perplexity {res.all_layers_ppl:.3f}")
    if res.suggested_ignore:
        print("suggested quantization.ignore additions (kept in BF16): " + ", ".join(res.suggested_ignore))
    else:
        print("no layer stands out (none at twice the median KL): nothing to keep in BF16 on this evidence")
    print(f"result: {out / 'sensitivity.result.json'} ({wall:.0f} s)")
    return EXIT_OK


def cmd_sensitivity_kv(args, loaded, variant) -> int:
    """``--kv``: one layer's KV in FP8 at a time (the variant's scale option), ranked by KL, and the greedy
    kv_skip_layers: auto choice (the kvcheck stage, run by itself in the quantize environment)."""
    from rich.table import Table

    r, f = loaded.recipe, str(loaded.path)
    if not kv.fp8_kv(variant):
        raise SuiteError(Problem(f, f"variants[{variant.name}].kv_cache_dtype", "--kv needs an FP8 KV cache",
                                 "pick a variant with kv_cache_dtype: fp8"))
    out = Path(args.out or loaded.resolve(r.output_dir) / "sensitivity") / f"{r.name}-{variant.name}-kv-{time.strftime('%Y%m%d-%H%M%S')}"
    vp = next(p for p in make_plan(loaded, out).variants if p.variant.name == variant.name)
    if vp.config(QUANTIZE) is not None and not (Path(vp.model_path) / "config.json").is_file():
        raise SuiteError(Problem(f, f"variants[{variant.name}].quantization", f"its checkpoint {vp.model_path} is not "
                                 "built yet (the k/v scales to check are in it)", "run `suite run` on the recipe first"))
    # kv_scales: auto chooses unit unless another option wins, and kept layers are judged against unit's KL:
    # the greedy would start at its own target, so it is not run (the ranking still is)
    cfg = kvcheck_config(loaded, variant, vp.model_path, auto_skip=variant.kv_scales != "auto", sweep=True,
                         max_tokens=r.eval.kv_check_tokens if args.max_seq_length is None else args.max_seq_length,
                         num_texts=r.eval.kv_check_texts if args.samples is None else min(args.samples, 30))
    res, wall = _run(f"KV sensitivity sweep of {variant.name} ({cfg.kv_scales}) in the quantize environment", KVCHECK,
                     cfg, out, r)
    if res is None:
        return EXIT_BAD_INPUT
    base = next(iter(res.kl.values()))["ppl_bf16"] if res.kl else float("nan")
    table = Table(title=f"{r.name}/{variant.name}: one layer's KV in FP8 ({res.kv_scales}) at a time, the others BF16 "
                        f"({res.num_texts} texts, {res.tokens} tokens; BF16 perplexity {base:.3f})")
    for col in ("rank", "layer", "KL(BF16 || FP8 KV) / token", "perplexity", "Δ perplexity", "KV capacity if top kept"):
        table.add_column(col, justify="right")
    for i, row in enumerate(res.ranked[:args.top], 1):
        table.add_row(str(i), str(row["layer"]), f"{row['kl']:.5f}", f"{row['ppl']:.3f}", f"{row['ppl_delta']:+.3f}",
                      f"{row['capacity_if_top_kept']:.2f}x")
    _wide_console().print(table)
    print(f"all layers in FP8: KL {res.kl[res.kv_scales]['kl']:.5f}; unit scale's {res.kl['unit']['kl']:.5f}")
    if res.auto:
        print(f"auto (fewest top-ranked layers in BF16 bringing the all-layer KL to <= {res.kl_target:.5f} = "
              f"max(1.25 x unit's KL, 0.005)): " + (f"keep {res.skip_layers} in BF16, KL {res.kl_with_skip:.5f}, KV "
                                                    f"capacity {res.capacity_vs_bf16:.2f}x BF16's" if res.skip_layers
                                                    else "no layer needed"))
    if res.recommended:
        chose = "kv_scales: auto chooses" if res.kv_scales_auto else "recommended scale option"
        print(f"{chose} (unit unless another option's KL is 1.25x lower): {res.recommended}")
    print(f"result: {out / 'kvcheck.result.json'} ({wall:.0f} s)")
    return EXIT_OK
