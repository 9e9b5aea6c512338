"""Gate stage: a finished run + a gate policy -> pass/fail per variant, with measured value and margin.

Exit codes of ``suite gate``: 0 every variant passes, 1 a gate failed, 2 bad input (no verdict). A value
exactly at its threshold passes.

Gates (``GateSpec``): absolute and relative accuracy drop per task; non-inferiority on the paired 95%
CI of the delta (its lower bound must be above minus the margin) and the lower bound of recovery
(baseline + CI low) / baseline; minimum throughput and sustainable-rate gain; maximum p99 TTFT/TPOT.
``max_kv_flagged_layers``: at most this many decoder layers flagged by the kvcheck stage (its thresholds:
``suite.stages.quantize.kvcheck``) under the KV scale option the variant serves with, layers kept in BF16
not counted; checked for every variant with an FP8 KV cache (``kv.flagged_layers``), bad input when the
stage did not run.
``max_perplexity_increase``: on every perplexity task the run evaluated (``suite_longppl*``: headline metric a
perplexity, lower is better), the **upper bound** of the paired 95% CI of the mean per-document token-perplexity
delta (variant minus baseline, ``suite.analysis.perplexity``) must be at most the threshold. The upper bound,
not the point estimate: a release gate must be shown that perplexity rose by no more than the threshold, as
``non_inferiority_margin`` is for accuracy; a point estimate passes a variant whose few, noisy documents say
nothing, and passes it more easily the noisier they are. The accuracy gates skip perplexity tasks (a rise
in perplexity would read as a gain), and a policy naming one in an accuracy gate is refused.

The gate refuses to give a verdict (``GateResult.problems``, exit 2) rather than read a number that
does not mean what the gate assumes:
- a number it reads that is missing, NaN or infinite, a latency or ratio below 0, a relative gate on a
  baseline accuracy of 0 or less, or two figures of the summary that disagree (a metric against the
  stage result it came from, a ratio against its two throughputs, a CI bound against its paired record);
- a CI gate without the paired item count ``n`` or over fewer than 2 common items; a perplexity gate on a
  pairing that left documents out (in one side only, scored twice, different text) or over fewer than 2;
- a run that did not finish, or is not what its recipe describes: no baseline or more than one,
  duplicate variant names, a variant not in the recipe (or a recipe variant not in the run), a task list
  other than the recipe's;
- a policy naming a task the run did not evaluate, an accuracy gate on a run with no tasks or on a
  perplexity task, ``max_perplexity_increase`` on a run that evaluated no perplexity task, a non-finite
  threshold; a policy file that is not UTF-8 YAML mapping onto ``GateSpec`` (``load_policy``).
A variant whose stages recorded errors fails (exit 1) with the error shown; the numbers it is missing
are listed in that failure, not reported as bad input. A baseline with errors is bad input: nothing can
be judged against it.

What it cannot see: a summary edited consistently (every related figure changed together) by someone
who can write the run folder. The summary is not signed; the MLflow runs hold the logged copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from suite.runtime.errors import Problem, SuiteError
from suite.recipe import DEFAULTS, PER_TASK, GateSpec
from suite.analysis import perplexity
from suite.analysis.paired import is_perplexity_metric
from suite.records.summary import RunSummary, VariantSummary
from suite.analysis.summary import headline_rule, metric_name, rate_unjudged, variant_metrics

EPS = 1e-9
FIX_SUMMARY = "rerun `suite run` (or `--resume` it); a summary.json is written by the run, not by hand"


@dataclass
class GateConfig:
    summary: RunSummary
    policy: GateSpec
    source: str = ""  # the summary file, for messages (default: <run_dir>/summary.json)
    policy_source: str = ""  # the policy file (default: the recipe's gates in the summary)


@dataclass
class GateCheck:
    variant: str
    gate: str
    measured: float
    threshold: float
    passed: bool
    upper: bool = False  # the threshold is a maximum (drops, latency), else a minimum
    n: int | None = None  # items behind an accuracy figure (the paired n, else the variant's scored n)
    detail: str = ""  # why, when the number alone does not say (a stage error)

    @property
    def margin(self) -> float:
        """How far inside (+) or outside (-) the threshold the measurement is."""
        return self.threshold - self.measured if self.upper else self.measured - self.threshold


def _check(variant: str, gate: str, measured: float, threshold: float, upper: bool, n: int | None = None) -> GateCheck:
    ok = measured <= threshold + EPS if upper else measured >= threshold - EPS
    return GateCheck(variant, gate, measured, threshold, ok, upper, n)


@dataclass
class GateResult:
    checks: list[GateCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # bad input: no verdict (exit 2)

    @property
    def missing(self) -> list[str]:
        """The problems as text (the name this list had when only missing metrics were reported)."""
        return [str(p) for p in self.problems]

    @property
    def passed(self) -> bool:
        return not self.problems and all(c.passed for c in self.checks)


# --------------------------------------------------------------------------------------------------
# Reading a policy file


def load_policy(path: str) -> GateSpec:
    """A ``--policy`` file (a recipe's ``gates:`` block) as a GateSpec; every problem a SuiteError."""
    from pydantic import ValidationError

    from suite.recipe import load_yaml, validation_problems

    fix_yaml = "write the recipe's gates: block as YAML (`suite schema` lists the gates)"
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise SuiteError(Problem(path, "", "policy file not found", "check the path")) from None
    except OSError as e:
        raise SuiteError(Problem(path, "", f"cannot read it: {e.strerror or e}", "give a readable YAML file")) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SuiteError(Problem(path, "", f"not UTF-8 text (byte {e.start} is {raw[e.start]:#04x})",
                                 "save the policy as UTF-8")) from None
    data = load_yaml(text, path)  # the recipe's reader: duplicate keys refused, errors name the line
    if data is None:
        raise SuiteError(Problem(path, "", "the policy is empty: it gates nothing", fix_yaml))
    if not isinstance(data, dict):
        raise SuiteError(Problem(path, "", f"a gate policy is a YAML mapping (max_drop: ..., min_throughput_gain: "
                                           f"...), not a {type(data).__name__}", fix_yaml))
    if "gates" in data and ("model" in data or "baseline" in data):
        raise SuiteError(Problem(path, "", "this is a recipe, not a gate policy",
                                 "omit --policy to use the run's own recipe gates, or give only a gates: block"))
    try:
        return GateSpec.model_validate(data)
    except ValidationError as e:
        problems = validation_problems(path, e)
        for p in problems:
            p.fix = p.fix or "`suite schema` describes every gate (GateSpec)"
        raise SuiteError(problems) from None


def recipe_gates(summary: RunSummary, source: str) -> GateSpec:
    """The gates of the recipe the run was made from (its copy in summary.json)."""
    from pydantic import ValidationError

    from suite.recipe import Recipe

    try:
        return Recipe.model_validate(summary.recipe).gates
    except ValidationError as e:
        first = e.errors()[0]
        raise SuiteError(Problem(source, "recipe", f"the run's recipe copy is not a valid recipe: "
                                 f"{'.'.join(map(str, first['loc']))}: {first['msg']}", FIX_SUMMARY)) from None


# --------------------------------------------------------------------------------------------------
# The run and the policy, before any number


def _structure(s: RunSummary, src: str, bad):
    """(the baseline, the run's recipe); the baseline None when the run is not what its recipe describes, and the
    recipe None when its copy is not valid (problems through ``bad``)."""
    from pydantic import ValidationError

    from suite.recipe import Recipe

    fix = FIX_SUMMARY
    names = [v.name for v in s.variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        bad("variants", f"variant name(s) repeated: {', '.join(dupes)}", fix)
    if not s.finished:
        bad("finished", "the run has no finish time: it did not complete", "finish it with `suite run --resume RUN`")
    bases = [v for v in s.variants if v.is_baseline]
    if not bases:
        bad("variants", "no variant is the baseline (is_baseline): nothing to compare against", fix)
    elif len(bases) > 1:
        bad("variants", f"{len(bases)} baselines ({', '.join(v.name for v in bases)}); a run has one", fix)
    try:
        recipe = Recipe.model_validate(s.recipe)
    except ValidationError as e:
        first = e.errors()[0]
        bad("recipe", f"the run's recipe copy is not a valid recipe: {'.'.join(map(str, first['loc']))}: "
                      f"{first['msg']}", fix)
        return None, None
    if s.recipe_name != recipe.name:
        bad("recipe_name", f"{s.recipe_name!r} but the recipe is named {recipe.name!r}", fix)
    if bases and bases[0].name != recipe.baseline.name:
        bad(f"{bases[0].name}", f"marked the baseline, but the recipe's baseline is {recipe.baseline.name!r}", fix)
    in_recipe = [v.name for v in recipe.all_variants()]
    for name in names:
        if name not in in_recipe:
            bad(name, f"a variant the recipe does not have (it has: {', '.join(in_recipe)})", fix)
    for name in in_recipe:
        if name not in names:
            bad(name, "a variant of the recipe that the run does not report: it would go unjudged", fix)
    tasks = [t.name for t in recipe.eval.tasks]
    if sorted(s.tasks) != sorted(tasks):
        bad("tasks", f"the run lists tasks [{', '.join(s.tasks)}] but its recipe evaluates [{', '.join(tasks)}]", fix)
    return (bases[0] if len(bases) == 1 and not dupes else None), recipe


def _policy_problems(policy: GateSpec, tasks: list[str], psrc: str, bad) -> None:
    fix_task = "gate only the tasks the run evaluated, or evaluate the task (eval.tasks)"
    for name in PER_TASK:
        for task, value in getattr(policy, name).items():
            if task not in tasks:
                bad(f"{name}.{task}", f"a gate on a task the run did not evaluate (it evaluated: "
                                      f"{', '.join(tasks) or 'no tasks'})", fix_task)
            if not math.isfinite(value):
                bad(f"{name}.{task}", f"threshold {value} is not a finite number", "give a finite threshold")
    for name, value in policy.model_dump().items():
        if isinstance(value, float) and not math.isfinite(value):
            bad(name, f"threshold {value} is not a finite number", "give a finite threshold")
    if not tasks:
        for name in DEFAULTS:
            if getattr(policy, name) is not None:
                bad(name, "an accuracy gate, but the run evaluated no tasks: it would check nothing", fix_task)


def perplexity_tasks(s: RunSummary, base: VariantSummary, bad) -> list[str]:
    """The run's tasks whose headline metric is a perplexity (lower is better), as the baseline scored them;
    a variant that scored one of them as the other kind is a problem."""
    kinds = {t: {is_perplexity_metric(sc.metric) for v in s.variants if v.evaluate for sc in v.evaluate.scores
                 if sc.task == t} for t in s.tasks}
    for t, k in kinds.items():
        if len(k) > 1:
            bad(f"evaluate.scores.{t}", "scored as a perplexity by some variants and as an accuracy by others",
                FIX_SUMMARY)
    base_scores = {sc.task: sc.metric for sc in base.evaluate.scores} if base.evaluate else {}
    return [t for t in s.tasks if is_perplexity_metric(base_scores.get(t))]


def _perplexity_policy_problems(policy: GateSpec, ppl_tasks: list[str], bad) -> None:
    for name in PER_TASK:
        for task in getattr(policy, name):
            if task in ppl_tasks:
                bad(f"{name}.{task}", "an accuracy gate on a perplexity task (lower is better): it would read a rise "
                    "in perplexity as a gain", "gate it with max_perplexity_increase")
    if policy.max_perplexity_increase is not None and not ppl_tasks:
        bad("max_perplexity_increase", "the run evaluated no perplexity task (word_perplexity, byte_perplexity or "
            "bits_per_byte, as its baseline scored them): it would check nothing",
            "add suite_longppl to eval.tasks, or drop the gate")


# --------------------------------------------------------------------------------------------------
# Reading numbers


class _Reader:
    """Reads the numbers of one variant (and its baseline) for the gates; bad ones become problems,
    except that a variant with errors collects what it lacks in ``lacking`` (part of its failure)."""

    def __init__(self, v: VariantSummary, base: VariantSummary, src: str, bad, headline: str = "max"):
        self.v, self.base, self.src, self.bad = v, base, src, bad
        self.headline = headline  # the recipe's throughput.headline: which load point the tput.* metrics are
        self.lacking: list[str] = []

    def from_record(self, who: VariantSummary, key: str, why: str) -> bool:
        """A throughput metric must be what its variant's benchmark record gives (summary.variant_metrics), as an
        accuracy must be its evaluate record's: a summary edited to raise a rate or a throughput is refused."""
        expected = variant_metrics(who, self.headline).get(key) if who.benchmark is not None else None
        if expected is not None and _same(who.metrics.get(key), expected):
            return True
        got = f"{expected:.6g}" if expected is not None else (
            "nothing" if who.benchmark is not None else "nothing (the summary has no benchmark record for it)")
        self.bad(f"{who.name}: {key}", f"is {who.metrics.get(key)} but its benchmark record gives {got} (needed by "
                 f"{why})", FIX_SUMMARY)
        return False

    def get(self, who: VariantSummary, key: str, why: str, nonneg: bool = False) -> float | None:
        if key not in who.metrics:
            if who is self.v and self.v.errors:
                self.lacking.append(key)
            else:
                self.bad(f"{who.name}: {key}", f"missing (needed by {why})",
                         "run the stage that measures it (the recipe's eval/throughput sections), or drop the gate")
            return None
        value = who.metrics[key]
        if not math.isfinite(value):
            self.bad(f"{who.name}: {key}", f"is {value}, not a finite number (needed by {why})", FIX_SUMMARY)
            return None
        if nonneg and value < 0:
            self.bad(f"{who.name}: {key}", f"is {value}: below 0, which it cannot be (needed by {why})", FIX_SUMMARY)
            return None
        if key.startswith("tput.") and not key.endswith(".ratio") and not self.from_record(who, key, why):
            return None
        return value

    def accuracy(self, who: VariantSummary, task: str, why: str) -> float | None:
        key = metric_name("acc", task)
        value = self.get(who, key, why)
        scores = [sc for sc in who.evaluate.scores if sc.task == task] if who.evaluate else []
        if value is None:
            return None
        # the metric must agree with the evaluate record it came from; a record that was removed or
        # renamed (so that nothing can be compared) is no excuse
        if len(scores) != 1:
            self.bad(f"{who.name}: {key}", f"has {'no' if not scores else len(scores)} evaluate score record(s) "
                     f"for {task} to check it against (needed by {why})", FIX_SUMMARY)
            return None
        if not _same(value, scores[0].value):
            self.bad(f"{who.name}: {key}", f"is {value} but the evaluate result says {scores[0].value}", FIX_SUMMARY)
            return None
        return value

    def same_items(self, task: str, why: str) -> bool:
        """The variant and the baseline were scored on as many items of ``task`` (a variant scored on 1
        item against a baseline on 1,319 is no comparison)."""
        ns = []
        for who in (self.v, self.base):
            score = next((sc for sc in who.evaluate.scores if sc.task == task), None) if who.evaluate else None
            ns.append(score.n if score else None)
        if None in ns or ns[0] != ns[1]:
            self.bad(f"{self.v.name}: {metric_name('acc', task)}", f"scored on {ns[0]} item(s) against the "
                     f"baseline's {ns[1]} (needed by {why})",
                     "score both on the same items (the same eval.tasks limits), then rerun")
            return False
        return True

    def scored_n(self, task: str) -> int | None:
        score = next((sc for sc in self.v.evaluate.scores if sc.task == task), None) if self.v.evaluate else None
        return score.n if score else None

    def paired(self, task: str, why: str) -> tuple[float, int] | None:
        """(CI low of the delta, n) for a CI gate on ``task``."""
        key = metric_name("acc", task)
        low = self.get(self.v, key + ".delta_ci_low", why)
        records = [p for p in self.v.paired if p.get("task") == task]
        n_metric = self.v.metrics.get(key + ".items_paired")
        field_n = f"{self.v.name}: {key}.items_paired"
        if len(records) > 1:
            self.bad(f"{self.v.name}: paired", f"{len(records)} paired records for {task}; there is one", FIX_SUMMARY)
            return None
        n_record = records[0].get("n") if records else None
        if n_metric is not None and not math.isfinite(n_metric):
            self.bad(field_n, f"is {n_metric}, not a finite number (needed by {why})", FIX_SUMMARY)
            return None
        if n_metric is not None and n_record is not None and n_metric != n_record:
            self.bad(field_n, f"is {n_metric:g} but the paired record says n = {n_record}", FIX_SUMMARY)
            return None
        n = n_metric if n_metric is not None else n_record
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, float)) or n != int(n) or n < 0):
            self.bad(field_n, f"the paired item count is {n!r}, not a count", FIX_SUMMARY)
            return None
        if n is not None and n < 2:
            self.bad(field_n, f"paired over {int(n)} common item(s): a confidence interval needs at least 2 "
                              f"(needed by {why})",
                     "check that the variant and the baseline scored the same items (their samples_*.jsonl)")
            return None
        if low is None:
            return None
        if n is None:
            self.bad(field_n, f"missing: the CI of the delta does not state over how many items (needed by {why})",
                     FIX_SUMMARY)
            return None
        if not records:  # the CI must agree with its paired record; a removed record is no excuse
            self.bad(f"{self.v.name}: paired", f"no paired record for {task} to check {key}.delta_ci_low against "
                     f"(needed by {why})", FIX_SUMMARY)
            return None
        if not _same(records[0].get("ci_low"), low):
            self.bad(f"{self.v.name}: {key}.delta_ci_low", f"is {low} but the paired record says "
                     f"{records[0].get('ci_low')}", FIX_SUMMARY)
            return None
        return low, int(n)

    def ratio(self, key: str, why: str) -> float | None:
        value = self.get(self.v, key, why, nonneg=True)
        plain = key.removesuffix(".ratio")
        a, b = self.v.metrics.get(plain), self.base.metrics.get(plain)
        if value is None:
            return None
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isfinite(a)
                and math.isfinite(b) and a >= 0 and b > 0):  # what the ratio was computed from must be there
            self.bad(f"{self.v.name}: {key}", f"cannot be checked: {plain} is {a} for the variant and {b} for the "
                     f"baseline (needed by {why})", FIX_SUMMARY)
            return None
        if not all([self.from_record(who, plain, why) for who in (self.v, self.base)]):  # both said, not the first
            return None
        if not _same(value, a / b):
            self.bad(f"{self.v.name}: {key}", f"is {value} but {plain} is {a} against the baseline's {b} "
                     f"(ratio {a / b:.6g})", FIX_SUMMARY)
            return None
        return value


def _same(a, b) -> bool:
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9,
                                                                                         abs_tol=1e-12)


# --------------------------------------------------------------------------------------------------
# The gates


def run(config: GateConfig) -> GateResult:
    s, policy = config.summary, config.policy
    src = config.source or str(Path(s.run_dir) / "summary.json")
    psrc = config.policy_source or f"{src}: recipe.gates"
    result = GateResult()

    def bad_in(file):
        def bad(fld, what, fix):
            if not any(p.file == file and p.field == fld for p in result.problems):  # once per number
                result.problems.append(Problem(file, fld, what, fix))
        return bad

    bad = bad_in(src)
    base, recipe = _structure(s, src, bad)
    _policy_problems(policy, list(s.tasks), psrc, bad_in(psrc))
    if base is None or result.problems:
        return result
    if base.errors:
        bad(base.name, f"the baseline's stages failed ({base.errors[0].splitlines()[0]}): nothing can be judged "
                       "against it", "fix the failure (its stage log) and rerun or `--resume` the run")
        return result
    ppl_tasks = perplexity_tasks(s, base, bad)
    _perplexity_policy_problems(policy, ppl_tasks, bad_in(psrc))
    if result.problems:
        return result

    bursts_said: set[str] = set()
    headline = headline_rule(recipe)
    for v in s.variants:
        if v is base:
            continue
        r = _Reader(v, base, src, bad, headline)
        first = len(result.checks)
        for task in (t for t in s.tasks if t not in ppl_tasks):  # accuracy: higher is better
            limit = policy.max_drop.get(task, policy.default_max_drop)
            rel = policy.max_relative_drop.get(task, policy.default_max_relative_drop)
            key = metric_name("acc", task)
            n_task = None
            if f"{key}.items_paired" in v.metrics and math.isfinite(v.metrics[f"{key}.items_paired"]):
                n_task = int(v.metrics[f"{key}.items_paired"])
            n_task = n_task if n_task is not None else r.scored_n(task)
            if limit is not None or rel is not None:
                why = f"the drop gates on {task}"
                a, b = r.accuracy(v, task, why), r.accuracy(base, task, why)
                if a is not None and b is not None and r.same_items(task, why):
                    if limit is not None:
                        result.checks.append(_check(v.name, f"max drop {task}", b - a, limit, True, n_task))
                    if rel is not None:
                        if b <= 0:
                            bad(f"{base.name}: {key}", f"is {b}: a drop relative to it is undefined",
                                f"gate {task} with max_drop (absolute) instead")
                        else:
                            result.checks.append(_check(v.name, f"max relative drop {task}", (b - a) / b, rel, True,
                                                        n_task))
            margin = policy.non_inferiority_margin.get(task, policy.default_non_inferiority_margin)
            if margin is not None:
                got = r.paired(task, f"the non-inferiority gate on {task}")
                if got is not None:
                    result.checks.append(_check(v.name, f"non-inferiority {task} (CI low of delta)", got[0], -margin,
                                                False, got[1]))
            recovery = policy.min_recovery_lower_bound.get(task)
            if recovery is not None:
                why = f"the recovery gate on {task}"
                got, b = r.paired(task, why), r.accuracy(base, task, why)
                if got is not None and b is not None:
                    if b <= 0:
                        bad(f"{base.name}: {key}", f"is {b}: recovery relative to it is undefined",
                            f"gate {task} with non_inferiority_margin instead")
                    else:
                        result.checks.append(_check(v.name, f"recovery lower bound {task}", (b + got[0]) / b,
                                                    recovery, False, got[1]))
        for key, limit, name, upper in (
            ("tput.output_tok_s.ratio", policy.min_throughput_gain, "min throughput gain", False),
            ("tput.sustainable_rate.ratio", policy.min_sustainable_rate_gain, "min sustainable-rate gain", False),
            ("tput.ttft_p99_ms", policy.max_ttft_p99_ms, "max TTFT p99 ms", True),
            ("tput.tpot_p99_ms", policy.max_tpot_p99_ms, "max TPOT p99 ms", True),
        ):
            if limit is not None and key == "tput.sustainable_rate.ratio" and (
                    unsure := [w for w in (v, base) if rate_unjudged(w)]):
                for w in unsure:  # a rate is judged only when its deciding probes were checked and steady
                    if w is v or w.name not in bursts_said:  # the baseline's once, not once per variant
                        bursts_said.add(w.name)
                        if w.benchmark.slo.steady is False:
                            bad(f"{w.name}: tput.sustainable_rate", "left out of the summary: the SLO search's "
                                f"deciding probe was a burst, not a sustained rate ({w.benchmark.slo.note}; needed by "
                                f"{name})", "raise throughput.slo.max_num_prompts (or lower slo.max_rate) so that "
                                "every probe lasts slo.steady_windows request lifetimes, and rerun the benchmark")
                        else:
                            bad(f"{w.name}: tput.sustainable_rate", "was not checked for a steady state (its SLO "
                                "result has no 'steady': slo.steady_windows 0, no e2e latency recorded, or a result "
                                f"from before the check), so it may be a burst's rate (needed by {name})",
                                "set throughput.slo.steady_windows (default 3) and rerun the benchmark")
            elif limit is not None:
                measured = r.ratio(key, name) if key.endswith(".ratio") else r.get(v, key, name, nonneg=True)
                if measured is not None:
                    result.checks.append(_check(v.name, name, measured, limit, upper))
        if policy.max_kv_flagged_layers is not None and v.kv_cache_dtype.startswith("fp8"):
            got = r.get(v, "kv.flagged_layers", "the max_kv_flagged_layers gate (the kvcheck stage: eval.kv_check)",
                        nonneg=True)
            if got is not None and v.kvcheck is not None and got != len(v.kvcheck.flagged_layers):
                bad(f"{v.name}: kv.flagged_layers", f"is {got}, but its kvcheck result flags "
                    f"{len(v.kvcheck.flagged_layers)} layer(s)", FIX_SUMMARY)
            elif got is not None:
                check = _check(v.name, "max KV flagged layers", got, policy.max_kv_flagged_layers, True)
                if v.kvcheck is not None and v.kvcheck.flagged_layers:
                    check.detail = f"layers {', '.join(map(str, v.kvcheck.flagged_layers))} ({v.kvcheck.kv_scales})"
                result.checks.append(check)
        for task in ppl_tasks if policy.max_perplexity_increase is not None else ():
            why = f"the max_perplexity_increase gate on {task}"
            got = perplexity.gate_reading(r, task, metric_name("ppl", task), why, FIX_SUMMARY)
            if got is not None and r.same_items(task, why):
                check = _check(v.name, f"max perplexity increase {task} (CI high of delta)", got[0],
                               policy.max_perplexity_increase, True, got[1])
                check.detail = got[2] + (f": its upper bound is above {policy.max_perplexity_increase:g}"
                                         if not check.passed else "")
                result.checks.append(check)
        if v.errors:
            detail = "; ".join(e.splitlines()[0] for e in v.errors if e.strip()) or "(empty error)"
            if r.lacking:
                detail += f" (so it lacks {', '.join(r.lacking)})"
            result.checks.insert(first, GateCheck(v.name, "stage errors", float(len(v.errors)), 0.0, False, True,
                                                  detail=detail))
    return result


def weaker_than(policy: GateSpec, reference: GateSpec) -> list[str]:
    """The gates of ``reference`` (the recipe's) that ``policy`` drops or loosens, as 'name: reference ->
    policy' lines: a policy given with ``--policy`` replaces the recipe's gates, and a release gate
    should say when that let more through. A higher maximum (drops, margins, latencies) or a lower
    minimum (gains, recovery) is looser; a gate the policy does not set is dropped."""
    out: list[str] = []
    looser_if_higher = lambda name: not name.startswith("min_")  # noqa: E731 - max_*, *_margin
    ref, pol = reference.model_dump(), policy.model_dump()
    for name, value in ref.items():
        if isinstance(value, dict):
            for task, limit in value.items():
                other = pol[name].get(task)
                if other is None:
                    out.append(f"{name}.{task}: {limit} -> (none)")
                elif (other > limit) if looser_if_higher(name) else (other < limit):
                    out.append(f"{name}.{task}: {limit} -> {other}")
        elif value is not None:
            other = pol[name]
            if other is None:
                out.append(f"{name}: {value} -> (none)")
            elif (other > value) if looser_if_higher(name) else (other < value):
                out.append(f"{name}: {value} -> {other}")
    return out
