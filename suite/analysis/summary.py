"""Stage results -> the flat metrics every consumer reads (summary.json, MLflow, gate, frontier).

Metric names are a public contract (and MLflow-legal: letters, digits, ``_ - . / `` and spaces):
  acc.<task>                  the task's headline metric (e.g. acc,none for MMLU)
  acc.<task>.<metric>.<filter>  every other lm-eval metric of the task ('@' written as '_at_')
  acc.<task>.delta            variant minus baseline (0 for the baseline)
  acc.mean, acc.mean.delta    mean of the headline metrics over the accuracy tasks (perplexity tasks left out)
  tput.output_tok_s, tput.req_s, tput.ttft_p99_ms, tput.tpot_p99_ms, tput.ttft_p50_ms, tput.tpot_p50_ms
                              at the headline load point (throughput.headline); tput.goodput_req_s: with --goodput
  acc.<task>.delta_ci_low, acc.<task>.delta_ci_high   95% paired interval of the delta (paired.py: its ci_method)
  acc.<task>.items_gained, acc.<task>.items_lost      items that flipped right / wrong against the baseline
  acc.<task>.items_paired     items both the variant and the baseline scored (the n of the paired delta)
  acc.<task>.mcnemar_p        McNemar's exact test on the flips (0/1 scores only)
  tput.output_tok_s.min/.max  spread of the headline point over its repetitions
  tput.<k>.ci_low/.ci_high    (k: output_tok_s, ttft_p99_ms, tpot_p99_ms, goodput_req_s)
                              the headline point's interval over its repetitions (suite.runtime.spread: a 95%
                              t interval with >= 3 repetitions, the min-max range with 2, none with 1)
  tput.repetitions, tput.stable   the headline point's repetitions and its stability rule (1.0 stable, 0.0 unstable:
                              max/min > 1.25 or an interval beyond +-10% of the median; absent with 1 repetition)
  tput.<k>.ratio.ci_low/.ci_high   (k: output_tok_s, goodput_req_s) the headline ratio's interval (best against best)
  tput.output_tok_s.ratio_equal_rate[.ci_low/.ci_high]   the ratio at the variant's headline point's rate, against
                              the baseline's point of the same label (absent where the baseline has none)
  tput.point.<label>.stable   each point's stability rule (1.0 / 0.0)
  tput.hbm_tb_s, tput.hbm_frac, tput.tensor_tflops, tput.tensor_frac   roofline of the headline point
  tput.ceiling_fraction       headline output tok/s / the offline engine's on the same workload
  tput.point.<label>.<k>      output_tok_s, req_s, ttft_p99_ms, tpot_p99_ms of every load point
  tput.kv_cache_tokens        KV-cache capacity that vLLM reported at start-up
  tput.peak_concurrency       measured: the most requests running at once during the headline point (the server's
                              vllm:num_requests_running, max over the point's samples); before 2026-12 this name held
                              the KV-derived figure now called tput.kv_capacity_requests
  tput.kv_capacity_requests   KV tokens / (input_len + output_len): requests whose KV fits at once (a capacity)
  tput.offline_tok_s          offline LLM.generate output tok/s (throughput.offline_ceiling)
  tput.sustainable_rate, tput.sustainable_output_tok_s   highest Poisson rate meeting the SLO
  tput.<k>.ratio    variant / baseline (output_tok_s, goodput_req_s, sustainable_rate, kv_cache_tokens, offline_tok_s)
  time.<stage>_s              wall time of each stage for the variant
  cost.per_1m_output_tokens   (only with the recipe's throughput.gpu_hour_cost) price of 1M output tokens at
                              the headline load point: gpu_hour x GPUs / (tput.output_tok_s x 3600) x 1e6
  cost.per_1m_output_tokens.slo   the same at the SLO's sustainable rate (tput.sustainable_output_tok_s)
  cost.per_1m_output_tokens[.slo].ratio   variant / baseline (< 1: cheaper per token)
  cost.gpus                   GPUs one engine takes: tensor_parallel_size x pipeline_parallel_size (engine_args)
  kv.flagged_layers           layers the kvcheck stage flagged under the variant's KV scale option (kept ones not counted)
  kv.skip_layers, kv.capacity_vs_bf16   layers kept in BF16 and the KV capacity that leaves, 2L/(L+s)
  kv.kl, kv.kl_with_skip      KL(BF16 || FP8 KV) per token, every layer in FP8 / with the kept layers in BF16
  ppl.<task>                  perplexity tasks (suite.analysis.perplexity): corpus token perplexity, the baseline's
                              over every document, a variant's over the documents paired with the baseline's
  ppl.<task>.delta, ppl.<task>.delta_ci_low, ppl.<task>.delta_ci_high   mean per-document token-perplexity delta
                              (variant minus baseline; > 0 is worse) and its 95% paired-bootstrap interval
  ppl.<task>.docs_paired, ppl.<task>.docs_unpaired, ppl.<task>.docs_worse   documents in the delta, left out
                              (in one side only, scored twice, different text: a warning), and worse in the variant
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from suite.analysis import perplexity as ppl, tput_spread
from suite.analysis.paired import compare_variant, is_perplexity_metric
from suite.recipe.checkpoint import label as ck_label
from suite.recipe.kv import effective_kv_scales
from suite.records.benchmark import BenchmarkResult, LoadPoint
from suite.records.summary import CostBasis, VariantSummary
from suite.runtime.engine.parallel import parallel_size
from suite.stages.benchmark.labels import shown_label
from suite.records.evaluate import EvaluateResult
from suite.records.kvcheck import KVCheckResult
from suite.records.quantize import QuantizeResult

_ILLEGAL = re.compile(r"[^A-Za-z0-9_\-./ ]")


def metric_name(*parts: str) -> str:
    name = ".".join(p.replace(",", ".").replace("@", "_at_") for p in parts if p)
    return _ILLEGAL.sub("_", name)


def headline_point(bench: BenchmarkResult, rule: str) -> LoadPoint | None:
    """The load point behind the tput.* metrics (of the first workload where the stage ran several)."""
    ok = [p for p in bench.points if p.ok and (bench.workload is None or p.workload == bench.workload)]
    if not ok:
        return None
    return max(ok, key=lambda p: p.output_tok_s) if rule == "max" else ok[-1]


def headline_rule(recipe) -> str:
    """The recipe's ``throughput.headline`` (``headline_point``'s rule), "max" for a recipe without throughput."""
    return recipe.throughput.headline if recipe.throughput else "max"


def variant_metrics(v: VariantSummary, headline_rule: str) -> dict[str, float]:
    """A variant's metrics by stage: accuracy and evaluation times, throughput, quantize time, KV-cache checks."""
    m = _evaluate_metrics(ev) if (ev := v.result(EvaluateResult)) else {}
    if b := v.result(BenchmarkResult):
        m.update(_benchmark_metrics(b, headline_rule))
    if q := v.result(QuantizeResult):
        m["time.quantize_s"] = q.wall_s
    if (c := v.result(KVCheckResult)) is not None:
        m["kv.flagged_layers"], m["kv.skip_layers"] = float(len(c.flagged_layers)), float(len(c.skip_layers))
        if c.capacity_vs_bf16 is not None:
            m["kv.capacity_vs_bf16"] = c.capacity_vs_bf16
        if c.kv_scales in c.kl:
            m["kv.kl"] = c.kl[c.kv_scales]["kl"]
        if c.kl_with_skip is not None:
            m["kv.kl_with_skip"] = c.kl_with_skip
        m["time.kvcheck_s"] = c.wall_s
    return m


def _evaluate_metrics(ev) -> dict[str, float]:
    """Each task's score and its other metrics, the mean accuracy, where the evaluation's time went."""
    m: dict[str, float] = ev.sequential_metrics()  # eval.sequential's looks, items used and saved
    for s in ev.scores:
        m[metric_name("acc", s.task)] = s.value
        for k, val in s.all_metrics.items():
            if k != s.metric and k != "alias":
                m[metric_name("acc", s.task, k)] = val
    accuracy = [s.value for s in ev.scores if not is_perplexity_metric(s.metric)]  # lower is better
    if accuracy:
        m["acc.mean"] = sum(accuracy) / len(accuracy)
    m["time.evaluate_s"], m["time.engine_load_s"] = ev.wall_s, ev.engine_load_s
    for part, seconds in ev.time_split_s.items():  # where the evaluation went (MLflow: time.evaluate.*)
        m[f"time.evaluate.{part}_s"] = seconds
    return m


def _benchmark_metrics(b, headline_rule: str) -> dict[str, float]:
    """The headline point's figures, each load point's, the KV capacity, the sustainable rate, the stage's times."""
    p = headline_point(b, headline_rule)
    m = _headline_metrics(p) if p else {}
    for q in b.points:
        if q.ok:
            for k in ("output_tok_s", "req_s", "ttft_p99_ms", "tpot_p99_ms"):
                m[metric_name("tput.point", q.label, k)] = getattr(q, k)
            if (stable := tput_spread.point_spread(q)["stable"]) is not None:
                m[metric_name("tput.point", q.label, "stable")] = float(stable)
    for key, value in (("tput.kv_cache_tokens", b.kv_cache_tokens), ("tput.kv_capacity_requests", b.kv_capacity_requests),
                       ("tput.offline_tok_s", b.offline_tok_s)):
        if value is not None:
            m[key] = float(value)
    if b.slo and b.slo.sustainable_rate is not None and b.slo.steady is not False:  # a burst's rate is not one
        m["tput.sustainable_rate"] = b.slo.sustainable_rate
        m["tput.sustainable_output_tok_s"] = b.slo.output_tok_s or 0.0
    m["time.benchmark_s"], m["time.server_start_s"] = b.wall_s, b.server_start_s
    return m


def _headline_metrics(p) -> dict[str, float]:
    """The headline load point: throughput, latencies, their spread, concurrency, roofline, NVML readings."""
    m = {"tput.output_tok_s": p.output_tok_s, "tput.req_s": p.req_s, "tput.ttft_p50_ms": p.ttft_p50_ms,
         "tput.ttft_p99_ms": p.ttft_p99_ms, "tput.tpot_p50_ms": p.tpot_p50_ms, "tput.tpot_p99_ms": p.tpot_p99_ms}
    if p.output_tok_s_min is not None:
        m["tput.output_tok_s.min"], m["tput.output_tok_s.max"] = p.output_tok_s_min, p.output_tok_s_max
    m.update(tput_spread.spread_metrics(p) | tput_spread.goodput_metrics(p))
    if p.server is not None and p.server.running_max is not None:
        m["tput.peak_concurrency"] = p.server.running_max  # measured: vllm:num_requests_running's max
    for k in ("hbm_tb_s", "hbm_frac", "tensor_tflops", "tensor_frac"):
        if k in p.roofline:
            m[f"tput.{k}"] = p.roofline[k]
    if p.ceiling_fraction is not None:
        m["tput.ceiling_fraction"] = p.ceiling_fraction
    for k in ("gpu_util_mean", "gpu_sm_clock_mhz_mean", "gpu_power_w_mean", "gpu_mem_used_gib_max"):
        if p.server is not None and getattr(p.server, k) is not None:
            m[f"tput.{k}"] = getattr(p.server, k)  # NVML during the headline point
    return m


Figures = dict[str, dict[str, float]]  # variant name -> the metrics a step of the analysis adds to its own


class Comparison(NamedTuple):
    """What a comparison with the baseline gives one variant: metrics, and its records (None: its records stay)."""

    metrics: dict[str, float]
    records: list[dict[str, Any]] | None


def delta_metrics(variants: list[VariantSummary], rule: str = "max") -> Figures:
    """acc.*.delta (variant minus baseline) for every accuracy metric, and the throughput ratios, by variant."""
    base = next(v for v in variants if v.is_baseline)
    acc_keys = [k for k in base.metrics if k.startswith("acc.") and not k.endswith(".delta")]
    out: Figures = {}
    for v in variants:
        m = {key + ".delta": v.metrics[key] - base.metrics[key] for key in acc_keys if key in v.metrics}
        for key in ("tput.output_tok_s", "tput.sustainable_rate", "tput.kv_cache_tokens", "tput.offline_tok_s"):
            if key == "tput.offline_tok_s" and _ceiling_kind(v) != _ceiling_kind(base):
                continue  # a resumed run's older ceiling (LLM's own batch limits) beside one with the server's
            if base.metrics.get(key) and key in v.metrics:
                m[key + ".ratio"] = v.metrics[key] / base.metrics[key]
        out[v.name] = m | tput_spread.ratio_spread(v, base, lambda b: headline_point(b, rule))
    return out


def _ceiling_kind(v: VariantSummary) -> bool | None:
    """Whether the variant's offline ceiling ran with the server's batch limits (False: LLM's own, measured before the
    suite gave it them); None without a ceiling."""
    b = v.result(BenchmarkResult)
    return None if b is None or b.offline_tok_s is None else b.offline_batch_limits is not None


COST_SCOPE = ("GPU time only, at the measured output rate: GPU-hour price x the engine's GPUs (tensor x pipeline "
              "parallel size) / output tokens per hour. All of that GPU time is charged to the output tokens (the "
              "prefill of the input tokens included, not priced apart); no idle or start-up time, no CPU, host, "
              "memory, network or storage cost")


def cost_metrics(variants: list[VariantSummary], price) -> tuple[CostBasis | None, Figures]:
    """Cost per 1M output tokens of each variant, from the recipe's ``throughput.gpu_hour_cost`` (``price``,
    a ``GpuHourCost`` or None: then no cost figure and no basis): the basis and each variant's figures.

    ``cost.per_1m_output_tokens`` = amount x GPUs / (output tok/s x 3600) x 1e6 at the headline load point
    (``tput.output_tok_s``), and ``.slo`` the same at the SLO's sustainable rate
    (``tput.sustainable_output_tok_s``, when the SLO search found one with a rate above zero). GPUs: one
    engine's, tensor_parallel_size x pipeline_parallel_size of the variant's engine_args (a variant on 2 GPUs
    costs twice per hour; data parallelism is not counted). What the figure includes: ``COST_SCOPE`` —
    GPU time only, at the measured rate; no idle time, no CPU/host cost. ``.ratio``: variant / baseline."""
    if price is None:
        return None, {}
    basis = CostBasis(gpu_hour=price.amount, currency=price.currency, source=price.source, scope=COST_SCOPE)
    out: Figures = {}
    for v in variants:
        gpus = parallel_size(v.engine_args)
        figures = {"cost.per_1m_output_tokens": v.metrics.get("tput.output_tok_s"),
                   "cost.per_1m_output_tokens.slo": v.metrics.get("tput.sustainable_output_tok_s")}
        m = {key: cost_per_1m(price.amount, gpus, tok_s) for key, tok_s in figures.items()
             if tok_s is not None and tok_s > 0}
        out[v.name] = {**m, "cost.gpus": float(gpus)} if m else {}
    base = next((v for v in variants if v.is_baseline), None)
    for v in variants if base is not None else ():
        for key in ("cost.per_1m_output_tokens", "cost.per_1m_output_tokens.slo"):
            if out[base.name].get(key) and key in out[v.name]:
                out[v.name][key + ".ratio"] = out[v.name][key] / out[base.name][key]
    return basis, out


def cost_per_1m(gpu_hour: float, gpus: int, output_tok_s: float) -> float:
    """Price of 1M output tokens: ``gpus`` GPUs at ``gpu_hour`` each per hour, producing ``output_tok_s``."""
    return gpu_hour * gpus / (output_tok_s * 3600.0) * 1e6


def paired_comparisons(variants: list[VariantSummary], seed: int = 0) -> dict[str, Comparison]:
    """Item-by-item comparison of each variant with the baseline (suite.analysis.paired), as metrics too."""
    base = next(v for v in variants if v.is_baseline)
    if not (base_ev := base.result(EvaluateResult)):
        return {}
    out = {}
    for v in variants:
        if v.is_baseline or not (ev := v.result(EvaluateResult)):
            continue
        m, records = {}, []
        for c in compare_variant(base_ev, ev, seed=seed):
            key = metric_name("acc", c.task)
            m[f"{key}.items_paired"] = float(c.n)  # every delta states its n; 0 and 1 are recorded too
            if c.n < 2:  # no interval over 0 or 1 items: no CI metrics (`suite gate` refuses a CI gate here)
                continue
            records.append(c.as_dict())
            m.update({f"{key}.delta_ci_low": c.ci_low, f"{key}.delta_ci_high": c.ci_high,
                      f"{key}.items_gained": float(c.gained), f"{key}.items_lost": float(c.lost)})
            if c.mcnemar_p is not None:
                m[f"{key}.mcnemar_p"] = c.mcnemar_p
        out[v.name] = Comparison(m, records)
    return out


def perplexity_comparisons(variants: list[VariantSummary], seed: int = 0) -> tuple[dict[str, Comparison], list[str]]:
    """Document-by-document perplexity of each variant against the baseline (suite.analysis.perplexity), as
    metrics too (the baseline's: its corpus perplexities, its records kept), and the warnings: documents that did
    not pair, no tokenizer to count tokens with."""
    base = next(v for v in variants if v.is_baseline)
    base_ev = base.result(EvaluateResult)
    tasks = [s.task for s in base_ev.scores if is_perplexity_metric(s.metric)] if base_ev else []
    if not tasks:
        return {}, []
    nothing = "no paired perplexity delta (`suite gate` refuses max_perplexity_increase on this run)"
    count = ppl.token_counter_file(kept) if (kept := base_ev.tokenizer_file) else ppl.token_counter(base.model_path)
    if count is None:
        return {}, [f"{', '.join(tasks)}: {nothing}: no readable tokenizer.json ({kept or base.model_path}) for the "
                    "baseline's model to count tokens with"]
    out, warnings = {}, []
    try:
        values = {t: ppl.corpus_ppl(base_ev, t, count) for t in tasks}
        out[base.name] = Comparison({metric_name("ppl", t): x for t, x in values.items() if x is not None}, None)
    except Exception as e:  # noqa: BLE001 - a broken samples file is a warning, not a lost summary
        warnings.append(f"{base.name}: its perplexity samples cannot be read: {type(e).__name__}: {e}")
    for v in variants:
        if v.is_baseline:
            continue
        out[v.name] = Comparison({}, [])  # computed here only: a second analysis does not double the records
        if not (ev := v.result(EvaluateResult)):
            continue
        try:
            found = ppl.compare_variant(base_ev, ev, count, seed=seed)
        except Exception as e:  # noqa: BLE001 - a samples file gone or broken: say so, no record (the gate refuses)
            warnings.append(f"{v.name}: {nothing}: its or {base.name}'s samples cannot be read: "
                            f"{type(e).__name__}: {e}")
            continue
        for c in found:
            key, m = metric_name("ppl", c.task), out[v.name].metrics
            m.update({f"{key}.docs_paired": float(c.n), f"{key}.docs_unpaired": float(c.unpaired)})
            if c.unpaired:
                warnings.append(f"{v.name}: {c.task}: {c.unpaired} {c.unit}(s) not paired with {base.name}'s, left out "
                                f"of the perplexity delta: {', '.join(c.unpaired_ids)}"
                                f"{' ...' if c.unpaired > len(c.unpaired_ids) else ''}")
            if c.n < 2:  # no interval over 0 or 1 documents (`suite gate` refuses the gate here)
                warnings.append(f"{v.name}: {c.task}: {nothing}: {c.n} {c.unit}(s) paired with {base.name}'s")
                continue
            out[v.name].records.append(c.as_dict())
            m.update({key: c.ppl, f"{key}.delta": c.delta, f"{key}.delta_ci_low": c.ci_low,
                      f"{key}.delta_ci_high": c.ci_high, f"{key}.docs_worse": float(c.worse)})
    return out, warnings


def variant_summary(vp, model_sha256: str | None = None) -> VariantSummary:
    """A planned variant (``VariantPlan``) as the summary records it before its stages ran (``model_sha256``: a
    brought checkpoint's fingerprint, ``plan.keys.brought_sha256``)."""
    v, q = vp.variant, vp.variant.quantization
    skip = v.kv_skip_layers
    ck = getattr(vp, "checkpoint", None) or {}  # variants[].model: the scheme its config.json names
    return VariantSummary(name=v.name, is_baseline=vp.is_baseline, scheme=q.scheme if q else ck_label(ck),
                          kv_cache=q.kv_cache if q else ("fp8" if str(ck.get("kv_cache", "")).startswith("fp8") else None), kv_cache_dtype=v.kv_cache_dtype,
                          engine_args=dict(v.engine_args), model_path=vp.model_path, model_sha256=model_sha256,
                          kv_scales=effective_kv_scales(v), kv_skip_layers=skip if isinstance(skip, list) else [],
                          kv_skip_layers_auto=skip == "auto")


def point_bounds(v: VariantSummary) -> list[tuple[str, str]]:
    """Each load point's bound and its reason, in the points' order, by the current rule with the label recorded when
    the point ran beside it when they differ ("engine-cpu (as run: seq-cap)": suite.stages.benchmark.labels). For the
    summary's table and the report: a resumed run keeps results labelled under an older rule."""
    b = v.result(BenchmarkResult)
    return [shown_label(p, v.engine_args) for p in b.points] if b is not None else []


def rate_unjudged(v: VariantSummary) -> bool:
    """The variant's SLO result says its sustainable rate is no sustained one, or may not be: the deciding probe was a
    burst (``steady`` False), or a rate was found whose steadiness was not checked (``steady`` None). The
    sustainable-rate gate refuses such a rate and the SLO-rate frontier leaves it out (``slo_warnings`` says why)."""
    slo = b.slo if (b := v.result(BenchmarkResult)) is not None else None
    return slo is not None and (slo.steady is False or (slo.steady is None and slo.sustainable_rate is not None))


def slo_warnings(v: VariantSummary) -> list[str]:
    """The SLO search's rate is a sustained one only if its deciding probes were (``suite.stages.benchmark.slo``)."""
    slo = b.slo if (b := v.result(BenchmarkResult)) is not None else None
    if slo is None or not slo.probes:
        return []
    if slo.steady is False:
        dropped = ("tput.sustainable_rate is left out" if slo.sustainable_rate is not None else
                   "no rate met the SLO, and the failure may be a burst's")
        return [f"{v.name}: the SLO search's deciding probe was a burst, not a sustained rate ({slo.note}): {dropped}"]
    if slo.steady is None and slo.sustainable_rate is not None:
        return [f"{v.name}: whether the SLO probes reached a steady state was not checked (no e2e latency recorded, "
                "slo.steady_windows 0, or a result from before the check): its sustainable rate may be a burst's, and "
                "the sustainable-rate gate does not judge it"]
    return []


def kv_warnings(v: VariantSummary) -> list[str]:
    """A warning naming the layers the kvcheck stage flagged under the scale option the variant serves with."""
    c = v.result(KVCheckResult)
    if c is None or not c.flagged_layers:
        return []
    why = sorted({f"{r['tensor']}: {flag}" for r in c.flagged if r["layer"] in c.flagged_layers for flag in r["flags"]})
    rec = (f"; recommended: {c.recommended} (unit unless another option's KL is 1.25x lower)"
           if c.recommended and c.recommended != c.kv_scales else "")
    return [f"{v.name}: FP8 KV scales ({c.kv_scales}) flag layer(s) {', '.join(map(str, c.flagged_layers))} "
            f"({'; '.join(why[:4])}{' ...' if len(why) > 4 else ''}){rec} — consider kv_skip_layers "
            "(`suite sensitivity --kv`)"]
