#!/usr/bin/env python3
"""The accuracy half of a run that has no summary yet (its benchmarks did not run, or not all): every variant's
finished evaluation against the baseline's, with the suite's own statistics.

usage: study_accuracy.py RUN_DIR [--tokenizer DIR] [--json OUT]

RUN_DIR is a run folder (`suite run`'s, e.g. one unpacked from a stretch archive); the evaluate results there name
their samples files by the path the run had on its machine, so they are looked up under RUN_DIR instead. Per task:
the score of each variant, the paired delta against the baseline with its 95% BCa CI, gained/lost and McNemar's p;
for perplexity tasks the corpus token perplexity and the paired per-document delta (the tokenizer of --tokenizer):
what `suite run` puts in summary.json, through the same code (suite.analysis.summary.paired / perplexity,
with their rules and warnings). Then the mean delta over the accuracy tasks, and, where a recipe
has a variant and the same build with layers kept in BF16, what share of the accuracy loss the kept layers won back.
Nothing here decides anything: `suite gate` reads a finished run's summary.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from suite.analysis.paired import is_perplexity_metric  # noqa: E402
from suite.analysis.perplexity import token_counter  # noqa: E402
from suite.records.summary import VariantSummary  # noqa: E402
from suite.analysis.assemble import with_comparisons  # noqa: E402
from suite.analysis.summary import paired_comparisons, perplexity_comparisons  # noqa: E402
from suite.records.evaluate import EvaluateResult  # noqa: E402
from suite.stages.registry import EVALUATE  # noqa: E402


def load(run: Path, variant: str) -> EvaluateResult | None:
    f = run / "variants" / variant / "evaluate.result.json"
    if not f.is_file():
        return None
    r = EvaluateResult.model_validate_json(f.read_text())
    local = {}
    for task, path in r.samples_files.items():
        rel = Path(path).parts
        i = rel.index("variants") if "variants" in rel else None
        local[task] = str(run.joinpath(*rel[i:])) if i is not None else path
    return r.model_copy(update={"samples_files": local})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--tokenizer", help="a folder with the baseline's tokenizer.json (without it, no perplexity)")
    ap.add_argument("--json", help="write the comparisons here too")
    args = ap.parse_args(argv)
    import yaml

    recipe = yaml.safe_load((args.run / "recipe.yaml").read_text())
    base_name = recipe["baseline"]["name"]
    names = [v["name"] for v in recipe.get("variants", [])]
    base = load(args.run, base_name)
    if base is None:
        print(f"error: {args.run}: no evaluate result for the baseline {base_name}", file=sys.stderr)
        return 2
    if args.tokenizer and token_counter(args.tokenizer) is None:
        print(f"error: {args.tokenizer}: no tokenizer.json", file=sys.stderr)
        return 2
    evals = {base_name: base}
    for n in names:
        e = load(args.run, n)
        if e is None:
            print(f"{n}: no evaluate result (not run)")
            continue
        evals[n] = e
    # the summary's records: model_path is where perplexity finds the baseline's tokenizer.json
    summaries = [VariantSummary(name=n, is_baseline=n == base_name, model_path=args.tokenizer or "",
                                stages={EVALUATE: e})
                 for n, e in evals.items()]
    summaries = with_comparisons(summaries, paired_comparisons(summaries), "paired", keep=True)
    found, said = perplexity_comparisons(summaries) if args.tokenizer else ({}, [])
    summaries = with_comparisons(summaries, found, "perplexity")
    for w in said:
        print(f"warning: {w}", file=sys.stderr)
    out = {"run": str(args.run), "baseline": base_name, "scores": {}, "paired": {}, "perplexity": {}}
    for v in summaries:
        e = v.result(EvaluateResult)
        out["scores"][v.name] = {s.task: {"metric": s.metric, "value": s.value, "n": s.n} for s in e.scores}
        out["scores"][v.name]["_wall_s"] = e.wall_s
        out["scores"][v.name]["_engine_load_s"] = e.engine_load_s
        if not v.is_baseline:
            out["paired"][v.name] = v.paired
            if v.perplexity:
                out["perplexity"][v.name] = v.perplexity
    tasks = [s.task for s in base.scores if not is_perplexity_metric(s.metric)]
    print(f"| variant | {' | '.join(tasks)} | mean Δ (points) |")
    print("|---|" + "---|" * (len(tasks) + 1))
    means = {}
    for n in evals:
        cells = []
        comps = {c["task"]: c for c in out["paired"].get(n, [])}
        for t in tasks:
            s = out["scores"][n].get(t)
            v = f"{s['value']:.4f}" if s else "—"
            c = comps.get(t)
            if c:
                v += f" ({100 * c['delta']:+.2f} [{100 * c['ci_low']:+.2f}, {100 * c['ci_high']:+.2f}], " \
                     f"{c['gained']}/{c['lost']})"
            cells.append(v)
        if comps:
            means[n] = sum(comps[t]["delta"] for t in tasks if t in comps) / len([t for t in tasks if t in comps])
        print(f"| {n} | {' | '.join(cells)} | {100 * means[n]:+.2f} |" if n in means else
              f"| {n} | {' | '.join(cells)} | — |")
    out["mean_delta"] = means
    if out["perplexity"]:
        print("\n| variant | task | corpus token ppl | paired Δ per document [95% CI] |")
        print("|---|---|---|---|")
        for n, comps in out["perplexity"].items():
            for c in comps:
                print(f"| {n} | {c['task']} | {c['ppl']:.3f} (base {c['baseline_ppl']:.3f}), {c['n']} docs | "
                      f"{c['delta']:+.4f} [{c['ci_low']:+.4f}, {c['ci_high']:+.4f}], {c['worse']} worse |")
    # kept layers: a variant whose ignore list is another's plus layers ("first: N" / "last: N" / re: entries)
    by_name = {v["name"]: v for v in recipe.get("variants", [])}
    for n, v in by_name.items():
        q = v.get("quantization") or {}
        for m, w in by_name.items():
            p = w.get("quantization") or {}
            if m == n or not q or not p or q.get("scheme") != p.get("scheme"):
                continue
            extra = set(q.get("ignore") or []) - set(p.get("ignore") or [])
            rest_q = {k: x for k, x in q.items() if k != "ignore"}
            rest_p = {k: x for k, x in p.items() if k != "ignore"}
            if extra and set(p.get("ignore") or []) <= set(q.get("ignore") or []) and rest_q == rest_p \
                    and n in means and m in means and means[m] < 0:
                share = (means[n] - means[m]) / -means[m]
                out.setdefault("kept_layers", {})[n] = {"against": m, "kept": sorted(extra), "won_back": share}
                print(f"\n{n} keeps {sorted(extra)} in BF16: mean Δ {100 * means[n]:+.2f} against {m}'s "
                      f"{100 * means[m]:+.2f} points: {100 * share:.0f}% of the loss won back")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
