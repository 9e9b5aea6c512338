"""`suite sensitivity`: the per-layer sweep, run as a stage process in the quantize environment."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from suite.errors import EXIT_BAD_INPUT, EXIT_OK, Problem, SuiteError
from suite.cli.render import _console, _wide_console


def first_calibration_set(loaded, calib) -> str:
    """The sweep draws its held-out texts from one set: the variant's (the first of a mix)."""
    from suite.stages.quantize import calibration
    from suite.plan.planner import absolute_calibration

    calib = absolute_calibration(loaded, calib)
    return calibration.mix_parts(calib)[0][0] if calib else "chat-demo"



def cmd_sensitivity(args) -> int:
    from rich.table import Table

    from suite.recipe import load_recipe
    from suite.stages.quantize.records import SensitivityConfig
    from suite.orchestrate.envs import stage_env
    from suite.orchestrate.jobs import run_stage

    loaded = load_recipe(args.recipe, serving=False)  # nothing is served: FP8 schemes are fine on CPU here
    r = loaded.recipe
    by_name = {v.name: v for v in r.variants}
    if args.variant not in by_name:
        raise SuiteError(Problem(str(loaded.path), "variants", f"no variant named {args.variant!r}",
                                 f"use one of: {', '.join(by_name)}"))
    q = by_name[args.variant].quantization
    if q is None or q.scheme not in ("FP8", "FP8_DYNAMIC"):
        raise SuiteError(Problem(str(loaded.path), f"variants[{args.variant}].quantization.scheme",
                                 "the sweep needs an FP8 or FP8_DYNAMIC weight scheme", "pick such a variant"))
    cfg = SensitivityConfig(model=loaded.model_path(), revision=r.model.revision, random_weights=r.model.weights == "random",
                            scheme=q.scheme, calibration=args.calibration or first_calibration_set(loaded, q.calibration),
                            skip_samples=q.num_calibration_samples if q.calibration else 0,
                            num_samples=args.samples, max_seq_length=args.max_seq_length, block=args.block)
    out = Path(args.out or loaded.resolve(r.output_dir) / "sensitivity") / f"{r.name}-{args.variant}-{time.strftime('%Y%m%d-%H%M%S')}"
    with _console().status(f"sensitivity sweep of {args.variant} ({q.scheme}) in the quantize environment"):
        res, error, wall, note = run_stage("sensitivity", cfg, out, stage_env(dict(r.runtime.env)))
    if note:
        print(f"warning: {note}", file=sys.stderr)
    if error:
        print(f"error: {error}", file=sys.stderr)
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
