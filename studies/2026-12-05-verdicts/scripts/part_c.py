#!/usr/bin/env python3
"""Print part (c)'s figures (the README's part (c) tables) from the archived raw files.

usage: part_c.py [RESULTS]     RESULTS: studies/2026-12-05-verdicts/results (default)

Reads runs-c-llama3-8b-shape/<run>/summary.json (the suite's medians, intervals, ratios, server stats of each
point's median repetition), its variants/<v>/benchmark/bench-*.json and monitor-*.jsonl (each repetition), and
logs/c/extra-out/plain/ (plain `vllm bench serve` results, the /metrics running maxima, times.txt).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def bench_row(path: Path) -> dict:
    d = json.loads(path.read_text())
    log = path.with_suffix(".log")
    seed = re.search(r"\bseed=(\d+)", log.read_text()).group(1) if log.is_file() else "?"
    return {"file": path.name, "seed": seed, "duration_s": d["duration"], "out_tok_s": d["output_throughput"],
            "req_s": d["request_throughput"], "max_out_tok_s": d["max_output_tokens_per_s"],
            "max_concurrent_requests": d["max_concurrent_requests"], "ttft_p50": d["median_ttft_ms"],
            "ttft_p99": d["p99_ttft_ms"], "tpot_p50": d["median_tpot_ms"], "tpot_p99": d["p99_tpot_ms"],
            "itl_p50": d["median_itl_ms"], "e2el_p50": d["median_e2el_ms"]}


def fmt_row(who: str, r: dict, extra: str = "") -> str:
    return (f"{who:11s} {r['file']:26s} seed {r['seed']:>4s}  {r['out_tok_s']:8.1f} tok/s  {r['req_s']:5.2f} req/s  "
            f"dur {r['duration_s']:5.1f} s  max out {r['max_out_tok_s']:7.0f}/s  outstanding max {r['max_concurrent_requests']}  "
            f"TTFT p50/p99 {r['ttft_p50']:6.0f}/{r['ttft_p99']:6.0f} ms  TPOT p50/p99 {r['tpot_p50']:5.1f}/{r['tpot_p99']:5.1f}  "
            f"ITL p50 {r['itl_p50']:5.1f}  E2E p50 {r['e2el_p50']:6.0f} ms{extra}")


def monitor(path: Path) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    run = [r["running"] for r in rows if r.get("running") is not None]
    pre = [r["preemptions"] for r in rows if r.get("preemptions") is not None]
    busy = [g for r in rows for g in r.get("gpu", []) if g.get("util_pct", 0) > 50]
    return {"running_max": max(run), "preemptions": pre[-1] - pre[0],
            "sm_clock": sum(g["sm_clock_mhz"] for g in busy) / len(busy) if busy else None,
            "power_w": sum(g["power_w"] for g in busy) / len(busy) if busy else None}


def main() -> int:
    res = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    run = next((res / "runs-c-llama3-8b-shape").iterdir())
    s = json.loads((run / "summary.json").read_text())
    print(f"## points (summary.json; {run.name})")
    for v in s["variants"]:
        b = v["benchmark"]
        print(f"{v['name']}: server_start_s {b['server_start_s']:.1f}, engine_start {b['engine_start']}, "
              f"kv_cache_tokens {b['kv_cache_tokens']}, benchmark.peak_concurrency {b['peak_concurrency']} (KV capacity in requests)")
        print("  server_command:", " ".join(b["server_command"][2:]))
        for p in b["points"]:
            sv = p["server"]
            print(f"  {p['label']:10s} median {p['output_tok_s']:8.1f}  min-max {p['output_tok_s_min']:.1f}-{p['output_tok_s_max']:.1f}  "
                  f"95% CI {p['output_tok_s_ci_low']:.1f}-{p['output_tok_s_ci_high']:.1f} ({p['ci_method']}, {p['output_tok_s_reps']} reps)  "
                  f"req/s {p['req_s']:.2f}  TTFT p99 {p['ttft_p99_ms']:.0f}  TPOT p99 {p['tpot_p99_ms']:.1f}  "
                  f"running_max {sv['running_max']:.0f}  preemptions {sv['preemptions']:.0f}  bound {p['bottleneck']} ({p['bottleneck_reason']})")
        m = v["metrics"]
        if "tput.output_tok_s.ratio.ci_low" in m:
            print(f"  ratio (headline 'max': best vs best) {m['tput.output_tok_s.ratio']:.4f} "
                  f"[{m['tput.output_tok_s.ratio.ci_low']:.4f}, {m['tput.output_tok_s.ratio.ci_high']:.4f}]; equal rate "
                  f"{m['tput.output_tok_s.ratio_equal_rate']:.4f} [{m['tput.output_tok_s.ratio_equal_rate.ci_low']:.4f}, "
                  f"{m['tput.output_tok_s.ratio_equal_rate.ci_high']:.4f}]; tput.peak_concurrency {m['tput.peak_concurrency']}")
    print("\n## repetitions (bench JSON; monitor-*.jsonl: running max, preemptions during it, GPU SM clock / power when >50% busy)")
    for v in s["variants"]:
        for f in sorted((run / "variants" / v["name"] / "benchmark").glob("bench-*.json")):
            mon = monitor(f.with_name(f.name.replace("bench-", "monitor-").replace(".json", ".jsonl")))
            print(fmt_row(v["name"], bench_row(f), f"  running max {mon['running_max']:.0f}  preemptions {mon['preemptions']:.0f}  "
                                                  f"SM {mon['sm_clock']:.0f} MHz  {mon['power_w']:.0f} W"))
    plain = res / "logs" / "c" / "extra-out" / "plain"
    print("\n## plain vllm serve + vllm bench serve (logs/c/extra-out/plain)")
    for f in sorted(plain.glob("*.json")):
        rm = f.with_suffix(".running_max")
        print(fmt_row("plain", bench_row(f), f"  running max {rm.read_text().strip() if rm.is_file() else '?'}"))
    for f in sorted(plain.glob("*.running_max")):
        if not f.with_suffix(".json").is_file():
            print(f"plain {f.stem}: no result (cut); running max {f.read_text().strip()}")
    print((plain / "times.txt").read_text().rstrip())
    base = {p["label"]: p for p in s["variants"][0]["benchmark"]["points"]}
    reps = [r["output_tok_s"] for r in base["rate-100.0"]["repetitions"]]
    pl = [json.loads(f.read_text())["output_throughput"] for f in sorted(plain.glob("bf16-rate100-r*.json"))]
    print(f"\nbf16 rate 100: suite/plain, median over mean {base['rate-100.0']['output_tok_s'] / (sum(pl) / len(pl)):.3f}; "
          f"range {min(reps) / max(pl):.3f}-{max(reps) / min(pl):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
