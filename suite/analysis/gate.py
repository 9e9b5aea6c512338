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

The gate judges the summary ``suite.analysis.derive.summarize`` makes of the run folder's records (stage results,
per-item records, recipe.yaml, plan.json, run.json); summary.json is a cache of it, never read for a figure: when it
differs from what the records give, `suite gate` says so in one warning line and judges the records.

The gate refuses to give a verdict (``GateResult.problems``, exit 2) rather than read a number that
does not mean what the gate assumes:
- a number it reads that is missing, NaN or infinite, a latency or ratio below 0, a relative gate on a
  baseline accuracy of 0 or less, or an interval that is not one (low <= value <= high);
- a CI gate without the paired item count ``n`` or over fewer than 2 common items; a perplexity gate on a
  pairing that left documents out (in one side only, scored twice, different text) or over fewer than 2;
- a run that did not finish, or is not what its recipe describes: no baseline or more than one,
  duplicate variant names, a variant not in the recipe (or a recipe variant not in the run), a task list
  other than the recipe's;
- a stage record that was tampered with: a per-item records file whose sha256 is not the one its evaluate result
  recorded, an evaluate score that is not what its per-item records give (``gates.recompute``), a stage result not
  bound to its planned job or a planned one missing (``gates.binding``);
- a policy naming a task the run did not evaluate, an accuracy gate on a run with no tasks or on a
  perplexity task, ``max_perplexity_increase`` on a run that evaluated no perplexity task, a non-finite
  threshold; a policy file that is not UTF-8 YAML mapping onto ``GateSpec`` (``load_policy``).
A variant whose stages recorded errors (run.json) fails (exit 1) with the error shown; the numbers it is missing
are listed in that failure, not reported as bad input. A baseline with errors is bad input: nothing can
be judged against it.

The metric a task is judged on, the rows of its records and an early stop are the plan's (``gates.provenance``). No
per-item records for a judged task (accuracy or perplexity): inconclusive when the run recorded ``samples_sha256``
(made since the field existed), judged on its aggregates as before when it did not (``gates.recompute``'s docstring).

What it cannot see: a run folder edited consistently (samples, stage results and hashes together) by
someone who can write it; ``suite gate --verify`` checks the HMAC manifest (``suite.outputs.manifest``) for that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.recipe import GateSpec, load_yaml, validation_problems, Recipe
from suite.analysis import derive
from suite.analysis.gates import binding, provenance, recompute
from suite.analysis.gates import policy as trusted
from suite.analysis.gates.base import FIX_SUMMARY, GateCheck, GateResult
from suite.analysis.gates.reader import Reader
from suite.analysis.gates.registry import GATES, Context
from suite.analysis.gates.sequential import stopped_tasks
from suite.analysis.gates.structure import (  # noqa: F401 - perplexity_tasks: read by the report
    perplexity_policy_problems, perplexity_tasks, policy_problems, structure,
)
from suite.records.summary import RunSummary
from suite.analysis.summary import headline_rule
from suite.records.evaluate import EvaluateResult


@dataclass
class GateConfig:
    summary: RunSummary
    policy: GateSpec
    source: str = ""  # the summary file, for messages (default: <run_dir>/summary.json)
    policy_source: str = ""  # the policy file (default: the recipe's gates in the summary)


# --------------------------------------------------------------------------------------------------
# Reading a policy file


def load_policy(path: str) -> GateSpec:
    """A ``--policy`` file (a recipe's ``gates:`` block) as a GateSpec; every problem a SuiteError."""
    fix_yaml = "write the recipe's gates: block as YAML (`suite schema` lists the gates)"
    try:
        raw = safeio.read_bytes(path, "policy")
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
    """The gates of summary.json's copy of the recipe, unchecked: only what a ``--policy`` loosens is measured against
    them (``weaker_than``); a verdict takes its gates from ``verdict`` (the trusted recipe)."""
    try:
        return Recipe.model_validate(summary.recipe).gates
    except ValidationError as e:
        first = e.errors()[0]
        raise SuiteError(Problem(source, "recipe", f"the run's recipe copy is not a valid recipe: "
                                 f"{'.'.join(map(str, first['loc']))}: {first['msg']}", FIX_SUMMARY)) from None


@dataclass
class Verdict:
    """A run judged: the gate's result; where its gates came from (``label``, empty when no trusted policy could be
    had: ``result.problems`` say why); a --policy file's sha256; the recipe's gates the policy loosens; warnings."""

    result: GateResult
    label: str = ""
    policy_sha256: str | None = None
    looser: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # about the folder, not the verdict: summary.json stale


def verdict(summary: RunSummary, run_dir: str | Path, policy: str | None = None,
            recipe: str | None = None) -> Verdict:
    """The one way a run is judged (`suite gate`, the report, `suite run`'s closing line, ``suite.Run.gate``) on
    ``summary``, the run folder's records as ``derive.summarize`` gives them (``derive.read_run``): the gates come from
    ``gates.policy.choose`` (the run folder's recipe.yaml under the sha256 the run recorded, or the ``recipe`` file
    under the same check, or a ``policy`` file); each stage result must be bound to its planned job and nothing
    planned may be missing (``gates.binding``). A policy that cannot be trusted, an unbound or missing result and a
    crash of a gate are bad input (no verdict). summary.json is never read for a figure: when it differs from
    ``summary``, ``warnings`` says so (``derive.CACHE_DIFFERS``)."""
    folder = Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent
    source = str(folder / "summary.json")
    warnings = [derive.CACHE_DIFFERS.format(run=folder)] if derive.cache_differs(summary, folder) else []
    try:
        spec, label, sha = trusted.choose(summary, str(folder), source, policy, recipe, load_policy)
    except SuiteError as e:
        return Verdict(GateResult(problems=list(e.problems)), warnings=warnings)
    try:
        bound = binding.Binding(summary, folder)  # each result its planned job's, none missing
        unbound = bound.check()
        if bound.unjudged:  # a result missing or unreadable: what the summary lacks of it is not said again
            result = GateResult(problems=unbound)
        else:
            result = run(GateConfig(summary, spec, source, policy or recipe or ""))
            result.problems += unbound
        looser = weaker_than(spec, recipe_gates(summary, source)) if policy and not result.problems else []
    except SuiteError as e:
        return Verdict(GateResult(problems=list(e.problems)), label, sha, warnings=warnings)
    except Exception as e:  # noqa: BLE001 - a crash must not read as "gate failed" (exit 1) with a traceback
        return Verdict(GateResult(problems=[Problem(source, "", f"the gate could not read this run: "
                                                    f"{type(e).__name__}: {e}",
                                                    "a bug in `suite gate`: report it with this run folder")]),
                       label, sha, warnings=warnings)
    return Verdict(result, label, sha, looser, warnings)


def run(config: GateConfig) -> GateResult:
    """Every registered gate (``gates.registry.GATES``) on every variant but the baseline, after the run's structure,
    the policy and the per-item records (``gates.recompute``) were checked; problems are bad input (no verdict)."""
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
    base, recipe = structure(s, src, bad)
    policy_problems(policy, list(s.tasks), psrc, bad_in(psrc))
    if base is None or result.problems:
        return result
    if base.errors:
        bad(base.name, f"the baseline's stages failed ({base.errors[0].splitlines()[0]}): nothing can be judged "
                       "against it", "fix the failure (its stage log) and rerun or `--resume` the run")
        return result
    ppl_tasks = perplexity_tasks(s, base, bad)
    perplexity_policy_problems(policy, ppl_tasks, bad_in(psrc))
    if result.problems:
        return result
    folder = Path(config.source).parent if config.source else Path(s.run_dir)
    recorded_hashes = recompute.records(s, folder, bad)
    provenance.check(s, folder, bad)  # metric, per-item records and sequential stops: the plan's, not the result's
    if ppl_tasks and (base_ev := base.result(EvaluateResult)) is not None and base_ev.tokenizer_file:  # the copy the baseline's
        provenance.counter(s, base, bad)  # evaluation kept (its perplexities' token counts): unchanged since
    if result.problems:
        return result
    recompute.verify(s, base, bad)
    if result.problems:
        return result
    said: set[str] = set()
    for v in s.variants:
        if v is base:
            continue
        r = Reader(v, base, src, bad, headline_rule(recipe))
        ctx = Context(s, v, base, r, policy, [t for t in s.tasks if t not in ppl_tasks and t not in stopped_tasks(v)],
                      ppl_tasks, bad, headline_rule(recipe), said)  # a task stopped early: gates.sequential
        for g in list(GATES.values()):
            g.check(ctx)
        if recorded_hashes:  # a run that recorded per-item hashes is judged only on figures it can recompute
            lacking = recompute.unrecomputable(v, base, list(s.tasks))  # perplexity tasks too
            for c in ctx.checks:
                if c.passed and any(t in c.gate.split() for t in lacking):
                    c.make_inconclusive(recompute.NO_RECORDS, "rerun the evaluation so that it writes its per-item "
                                        "records (`suite run --resume --force`)")
        if v.errors:
            detail = "; ".join(e.splitlines()[0] for e in v.errors if e.strip()) or "(empty error)"
            if r.lacking:
                detail += f" (so it lacks {', '.join(r.lacking)})"
            ctx.checks.insert(0, GateCheck(v.name, "stage errors", float(len(v.errors)), 0.0, False, True,
                                           detail=detail))
        result.checks += ctx.checks
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