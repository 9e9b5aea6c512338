#!/usr/bin/env python3
"""The README's figures, from results/ (what scripts/collect.py kept of the device's archives).

usage: cd REPO && PYTHONPATH=$PWD python studies/2026-12-05-verdicts/scripts/tables.py [RESULTS]

Pairs: the suite's own statistics (suite.analysis.paired.item_scores / compare: delta = A - B, 95% BCa bootstrap CI,
items gained/lost, McNemar p) on each variant's items.jsonl.gz; identical generations from the items' resps_key
(the sha256 of lm-eval's `resps`). Engine spread: suite.analysis.engine_spread.task_spread over each
variant's configurations. Times: jobs.json,
the evaluate results' time_split_s, the served runs' benchmark.result.json. Gates: logs/extra-out/gate-*.txt.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from suite.analysis.paired import compare, item_scores

HERE = Path(__file__).resolve().parents[1]
METRIC = "exact_match,strict-match"
OFF, ON = ("a-offline", "a-served"), ("a-offline-bi", "a-served-bi")


def engine_spread_module():
    from suite.analysis import engine_spread

    return engine_spread


def run_dir(res: Path, recipe: str) -> Path:
    return sorted((res / f"runs-{recipe}").glob("2*"))[-1]


def items_file(res: Path, name: str) -> Path:
    recipe, variant = name.split(".", 1)
    return run_dir(res, recipe) / "variants" / variant / "evaluate" / "items.jsonl.gz"


def load_items(path: Path) -> tuple[dict, dict]:
    """({(task, doc_id): score}, {(task, doc_id): resps_key}) from an items file (item_scores reads plain text)."""
    scores, gens = {}, {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("filter") == "strict-match":
                scores[(r["task"], int(r["doc_id"]))] = float(r["exact_match"])
                gens[(r["task"], int(r["doc_id"]))] = r["resps_key"]
    return scores, gens


def item_scores_gz(path: Path, tmp: Path) -> dict:
    """suite.analysis.paired.item_scores on the items file (ungzipped to a scratch file: it opens plain text)."""
    tmp.write_bytes(gzip.decompress(path.read_bytes()))
    return item_scores(tmp, METRIC)


def pair_line(res: Path, a: str, b: str, tmp: Path) -> dict:
    sa, ga = load_items(items_file(res, a))
    sb, gb = load_items(items_file(res, b))
    A, B = item_scores_gz(items_file(res, a), tmp), item_scores_gz(items_file(res, b), tmp)
    assert A == sa and B == sb
    keys = sorted(set(A) & set(B))
    c = compare("suite_gsm8k", METRIC, B, A)  # delta = A - B
    return {"a": a, "b": b, "n": c.n, "same_score": sum(A[k] == B[k] for k in keys) / len(keys),
            "same_gen": sum(ga[k] == gb[k] for k in keys) / len(keys), "delta": c.delta, "ci": (c.ci_low, c.ci_high),
            "gained": c.gained, "lost": c.lost, "p": c.mcnemar_p}


def fmt(p: dict) -> str:
    return (f"{p['same_score']:.1%} / {p['same_gen']:.1%}, Δ {p['delta']:+.4f} [{p['ci'][0]:+.4f}, {p['ci'][1]:+.4f}]"
            f" (+{p['gained']}/-{p['lost']}, p {p['p']:.2g}, n {p['n']})")


def pairs(off: str, srv: str) -> list[tuple[str, str, str]]:
    return [("fp8kv 64 vs 1,024", f"{off}.fp8kv-seqs64", f"{off}.fp8kv-seqs1024"),
            ("bf16 64 vs 1,024", f"{off}.bf16-seqs64", f"{off}.bf16-seqs1024"),
            ("fp8kv served vs offline 1,024", f"{srv}.fp8kv-served", f"{off}.fp8kv-seqs1024"),
            ("bf16 served vs offline 1,024", f"{srv}.bf16-served", f"{off}.bf16-seqs1024"),
            ("fp8kv served vs offline 64", f"{srv}.fp8kv-served", f"{off}.fp8kv-seqs64"),
            ("bf16 served vs offline 64", f"{srv}.bf16-served", f"{off}.bf16-seqs64"),
            ("FP8 KV - BF16 at 64", f"{off}.fp8kv-seqs64", f"{off}.bf16-seqs64"),
            ("FP8 KV - BF16 at 1,024", f"{off}.fp8kv-seqs1024", f"{off}.bf16-seqs1024"),
            ("FP8 KV - BF16 served", f"{srv}.fp8kv-served", f"{srv}.bf16-served")]


def summary(res: Path, recipe: str) -> dict:
    return json.loads((run_dir(res, recipe) / "summary.json").read_text())


def main() -> int:
    res = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    tmp = Path("/tmp/verdicts-tables-items.jsonl")
    print("## (a) pairs: same score / same generation, delta = A - B [95% CI] (+gained/-lost, McNemar p, n)")
    print("| pair | mode off | mode on |\n|---|---|---|")
    for (label, a0, b0), (_, a1, b1) in zip(pairs(*OFF), pairs(*ON)):
        print(f"| {label} | {fmt(pair_line(res, a0, b0, tmp))} | {fmt(pair_line(res, a1, b1, tmp))} |")
    for v in ("bf16-seqs64", "fp8kv-seqs64", "bf16-seqs1024", "fp8kv-seqs1024"):
        print(f"| mode on vs off, {v} | — | {fmt(pair_line(res, f'{ON[0]}.{v}', f'{OFF[0]}.{v}', tmp))} |")
    for v in ("bf16-served", "fp8kv-served"):
        print(f"| mode on vs off, {v} | — | {fmt(pair_line(res, f'{ON[1]}.{v}', f'{OFF[1]}.{v}', tmp))} |")

    print("\n## scores (summary.json acc.suite_gsm8k = exact_match,strict-match; off, on)")
    for recipe in (*OFF, *ON, "b-checkpoint-path"):
        s = summary(res, recipe)
        print(f"{recipe:18s} " + "  ".join(f"{v['name']} {v['metrics']['acc.suite_gsm8k']:.4f}" for v in s["variants"]))

    print("\n## engine spread (suite.analysis.engine_spread.task_spread over 64 / 1,024 / served)")
    es = engine_spread_module()
    for mode, (off, srv) in (("off", OFF), ("on", ON)):
        for kv in ("bf16", "fp8kv"):
            labelled = []
            for name in (f"{off}.{kv}-seqs64", f"{off}.{kv}-seqs1024", f"{srv}.{kv}-served"):
                sc = item_scores_gz(items_file(res, name), tmp)
                labelled.append((name, sum(sc.values()) / len(sc), sc))
            e = es.task_spread("suite_gsm8k", METRIC, labelled)
            print(f"mode {mode} {kv:6s} engine_spread {e.spread:.4f} flip_rate {e.flip_rate:.4f} "
                  f"({e.flipped}/{e.items} items, {len(e.configs)} configs; scores {', '.join(f'{x:.4f}' for x in e.scores)})")

    print("\n## times (jobs.json wall_s; generate_until = time_split_s['requests.generate_until']; served: server start)")
    for recipe in (*OFF, *ON, "b-checkpoint-path"):
        rd = run_dir(res, recipe)
        jobs = json.loads((rd / "jobs.json").read_text())
        print(f"{recipe} (run wall {jobs['wall_s']:.1f} s)")
        for j in jobs["jobs"]:
            v = j["variant"]
            extra = ""
            if j["stage"] == "evaluate":
                r = json.loads((rd / "variants" / v / "evaluate.result.json").read_text())
                extra = f"generate_until {r['time_split_s']['requests.generate_until']:.1f} s, engine load {r['engine_load_s']:.1f} s"
            elif j["stage"] == "benchmark":
                b = json.loads((rd / "variants" / v / "benchmark.result.json").read_text())
                ev = b.get("evaluate") or {}
                extra = (f"server start {b['server_start_s']:.1f} s, evaluate {ev.get('wall_s', 0):.1f} s "
                         f"(generate_until {ev.get('time_split_s', {}).get('requests.generate_until', 0):.1f} s)")
                for p in b["points"]:
                    extra += (f"; {p['label']} output {p['output_tok_s']:.0f} tok/s "
                              f"[{p.get('output_tok_s_min', p['output_tok_s']):.0f}, {p.get('output_tok_s_max', p['output_tok_s']):.0f}]"
                              f" over {len(p.get('repetitions') or [p])} rep.")
            print(f"  {j['id']:28s} {j['state']} wall {j['wall_s']:7.1f} s  {extra}")

    print("\n## gates (logs/extra-out/gate-*.txt: verdict, exit code) and the recipes' gates")
    for recipe in (*OFF, *ON, "b-checkpoint-path"):
        lines = (res / "logs" / "extra-out" / f"gate-{recipe}.txt").read_text().strip().splitlines()
        verdict = next((x for x in lines if x.startswith("gate:")), "?")
        failed = [x for x in lines if x.startswith("FAILED")]
        print(f"{recipe:18s} {verdict} ({lines[-1]}); recipe gates {({k: g for k, g in summary(res, recipe)['recipe'].get('gates', {}).items() if g})}"
              + ("; " + "; ".join(failed) if failed else ""))

    print("\n## (b)")
    rd = run_dir(res, "b-checkpoint-path")
    p = pair_line(res, "b-checkpoint-path.fp8-dynamic-path", "b-checkpoint-path.bf16", tmp)
    print(f"fp8-dynamic-path - bf16: {fmt(p)}")
    jobs = json.loads((rd / "jobs.json").read_text())
    print("stages in jobs.json:", sorted({j["stage"] for j in jobs["jobs"]}), "; quantize job:", any(j["stage"] == "quantize" for j in jobs["jobs"]))
    plan = json.loads((rd / "plan.json").read_text())
    for name, v in plan["variants"].items():
        print(f"plan.json variants.{name}.checkpoint: {(v.get('checkpoint') or {}).get('summary')}; quantize {v.get('quantize')}")
    s = summary(res, "b-checkpoint-path")
    for v in s["variants"]:
        m = v["metrics"]
        print(f"{v['name']}: scheme {v.get('scheme')}, model_path {v.get('model_path')}, output {m.get('tput.output_tok_s', 0):.0f} tok/s "
              f"[{m.get('tput.output_tok_s.min', 0):.0f}, {m.get('tput.output_tok_s.max', 0):.0f}], ratio {m.get('tput.output_tok_s.ratio', 1):.3f}"
              + (f", ratio CI [{m['tput.output_tok_s.ratio_ci_low']:.3f}, {m['tput.output_tok_s.ratio_ci_high']:.3f}]"
                 if "tput.output_tok_s.ratio_ci_low" in m else ""))
    tmp.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
