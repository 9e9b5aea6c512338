"""What a variant's evaluation says of itself, held to what the run planned: the run folder's plan.json (to which
``gates.binding`` binds every stage result and the config it was made with) names each variant's evaluate config,
and the gate takes from it, never from the result, what decides a verdict:

- **the headline metric** a task is judged on: the planned task's ``metric`` (eval.tasks[].metric), else the task's
  declared headline (``suite.recipe.checks.headline_metric``: a tasks/ YAML's ``metadata.suite_primary_metric``, a
  standard task's table), as the evaluate stage picks it. A score naming another metric (``acc_norm`` for ``acc``,
  gsm8k's ``flexible-extract`` filter for ``strict-match``) is bad input. A task with neither is scored by the stage
  on the first metric lm-eval reports: the score must name that one of its ``all_metrics``;
- **the per-item records** a task is judged on: one samples file (one path, one sha256) serves one task, and every row
  judged carries the task's name in its ``task`` field (a group of tasks/: one of its subtasks); a task whose subtasks
  are not known here (a standard lm-eval group) may carry no other planned task's name;
- **a sequential record** (``evaluate.sequential``, eval.sequential's early stop): only where the planned config has
  ``sequential``, one for every planned task, with the plan's seed, looks, margin and headline metric, and with
  ``items_used`` the number of items its per-item records score;
- **the perplexity token counts** (``counter``): the baseline's tokenizer as the run kept it, the copy its evaluate
  stage wrote into the run folder (``tokenizer_file`` of its own result file, checked against ``tokenizer_sha256``;
  the summary's copy only where the folder holds no such result: binding refuses that for a verdict), so the folder
  gates on a machine without the model; a run made before it was kept: the tokenizer.json of the model the
  baseline's planned evaluation loaded (its ``engine.model``), never a path the summary names.

A variant with no planned evaluate config (plan.json or the variant missing from it) is not checked here: binding
refuses it. What it cannot see: plan.json, configs, results and per-item records rewritten together; ``suite gate
--verify`` (the signed manifest) covers that."""

from __future__ import annotations

from pathlib import Path

from suite.analysis import paired as pairing
from suite.analysis import perplexity
from suite.analysis.gates.binding import PLAN, read_json
from suite.recipe.checks import headline_metric, task_leaves
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateConfig, EvaluateResult
from suite.records.paths import resolved_names
from suite.runtime import safeio

FIX_PLAN = "rerun the evaluation (`suite run --resume --force`): the gate judges what the run planned (plan.json)"
_EVALUATE = EvaluateConfig.__name__.removesuffix("Config").lower()  # the evaluate stage's name (plan.json, files)
_BENCHMARK = BenchmarkResult.__name__.removesuffix("Result").lower()


def planned_evaluation(folder: Path, name: str) -> dict | None:
    """Variant ``name``'s evaluate config as plan.json plans it (a served evaluation's, in its benchmark config, too);
    None where there is none to read."""
    plan, _ = read_json(Path(folder) / PLAN)
    stages = (plan.get("variants") or {}).get(name) if isinstance(plan, dict) else None
    if not isinstance(stages, dict):
        return None
    for config in [stages.get(_EVALUATE), *(c.get(_EVALUATE) for c in stages.values() if isinstance(c, dict))]:
        if isinstance(config, dict) and isinstance(config.get("tasks"), list):
            return config
    return None


def planned_tasks(config: dict) -> dict[str, dict]:
    """task name -> its planned TaskRun (name, metric, ...) of an evaluate config."""
    return {t["name"]: t for t in config.get("tasks") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)}


def check(s, folder: Path, bad) -> None:
    """Every evaluated variant's headline metrics, per-item records and sequential records against its plan."""
    for v in s.variants:
        config = planned_evaluation(folder, v.name) if v.result(EvaluateResult) is not None else None
        if config is None:
            continue
        heads = headlines(v, planned_tasks(config), bad)
        records(v, heads, bad)
        sequential(v, config, heads, bad)


def headlines(v, tasks: dict[str, dict], bad) -> dict[str, str]:
    """task -> the metric the plan has it judged on, for every planned task the variant scored; a score naming
    another is bad input."""
    out = {}
    for sc in v.result(EvaluateResult).scores:
        if sc.task not in tasks:
            continue  # not planned: binding says so
        metric = tasks[sc.task].get("metric")
        want = headline_metric(sc.task, metric if isinstance(metric, str) else None)
        if want is None:  # the stage's rule for a task with no known headline: lm-eval's first metric
            want = min(sc.all_metrics) if sc.all_metrics else sc.metric
        out[sc.task] = want
        if sc.metric != want:
            bad(f"{v.name}: evaluate.scores.{sc.task}.metric", f"{sc.metric!r}, but the run planned {sc.task} judged "
                f"on {want!r} (its evaluate config's metric, else the task's headline): a task is judged on the "
                "metric the run planned, not the one its result names", FIX_PLAN)
    return out


def _row_tasks(path: str, metric: str) -> set[str]:
    """The ``task`` field of every row of a samples file that is judged on ``metric``."""
    if pairing.is_perplexity_metric(metric):
        return {key.split("/", 1)[0] for key in perplexity.doc_scores(path)[0]}
    return {task for task, _ in pairing.item_scores(path, metric)}


def records(v, heads: dict[str, str], bad) -> None:
    """One samples file a task, and each task's rows its own (see the module docstring)."""
    ev = v.result(EvaluateResult)
    files, shas = ev.samples_files, ev.samples_sha256
    seen: dict[str, str] = {}
    for task in sorted(files):
        for key in (str(Path(files[task]).resolve()), shas.get(task)):
            if key and (other := seen.setdefault(key, task)) != task:
                bad(f"{v.name}: evaluate.samples_files.{task}", f"{files[task]} is {other}'s per-item records too: "
                    "one samples file serves one task", FIX_PLAN)
    names = {t: task_leaves(t) for t in heads}
    for task in sorted(set(heads) & set(files)):
        try:
            carried = _row_tasks(files[task], heads[task])
        except (OSError, ValueError, safeio.UnsafeRead):
            continue  # gone, changed or broken: the recompute names the file and why
        if names[task] is not None:
            foreign = carried - names[task]
        else:  # subtasks unknown here: no other planned task's rows
            foreign = {n for n in carried if any(n in (names[o] or {o}) for o in heads if o != task)}
        if foreign:
            bad(f"{v.name}: evaluate.samples_files.{task}", f"{files[task]} holds rows of {', '.join(sorted(foreign))} "
                f"(their task field), not of {task}: a task is judged on its own per-item records", FIX_PLAN)


def sequential(v, config: dict, heads: dict[str, str], bad) -> None:
    """A sequential record only where the plan has eval.sequential, as planned, and true to its per-item records."""
    spec, recs, where = config.get("sequential"), v.result(EvaluateResult).sequential, f"{v.name}: evaluate.sequential"
    if not isinstance(spec, dict):
        if recs:
            bad(where, f"records an early-stopping evaluation of {', '.join(sorted(recs))}, but the run planned none "
                "(its evaluate config has no eval.sequential): a stop the plan does not explain is not judged",
                FIX_PLAN)
        return
    margins = spec.get("margins") if isinstance(spec.get("margins"), dict) else {}
    for task in sorted(heads):
        rec = recs.get(task)
        if rec is None:
            bad(f"{where}.{task}", "missing: the run planned eval.sequential, whose evaluation records every task",
                FIX_PLAN)
            continue
        planned = {"seed": spec.get("seed"), "looks_planned": spec.get("looks"), "margin": margins.get(task),
                   "metric": heads[task]}
        for fld, want in planned.items():
            if getattr(rec, fld) != want:
                bad(f"{where}.{task}.{fld}", f"{getattr(rec, fld)!r}, but the run planned {want!r}", FIX_PLAN)
        if not 0 < rec.items_used <= rec.n_items or rec.items_used + rec.items_saved != rec.n_items:
            bad(f"{where}.{task}.items_used", f"{rec.items_used} used and {rec.items_saved} saved of {rec.n_items} "
                "items: not a count of the task's items", FIX_PLAN)
        f = v.result(EvaluateResult).samples_files.get(task)
        try:
            scored = len(pairing.item_scores(f, rec.metric)) if f else None
        except (OSError, ValueError, safeio.UnsafeRead):
            continue  # the recompute names the file and why
        if scored is not None and scored != rec.items_used:
            bad(f"{where}.{task}.items_used", f"{rec.items_used}, but its per-item records {f} score {scored} items: "
                "the items used are the items scored", FIX_PLAN)


def kept_tokenizer(folder: Path, name: str) -> tuple[str | None, str | None] | None:
    """(tokenizer_file, tokenizer_sha256) as variant ``name``'s own evaluate result in the run folder records them (a
    served evaluation's, in its benchmark result; (None, None): it records none); None: no such result to read."""
    vdir = Path(folder) / "variants" / name
    for path, key in ((vdir / f"{_EVALUATE}.result.json", None), (vdir / f"{_BENCHMARK}.result.json", _EVALUATE)):
        data, _ = read_json(path)
        data = data.get(key) if key and isinstance(data, dict) else data
        if isinstance(data, dict):
            data = resolved_names(data, Path(folder))
            return data.get("tokenizer_file"), data.get("tokenizer_sha256")
    return None


def counter(s, base, bad) -> perplexity.Counter | None:
    """The token counter of the perplexity recompute (see the module docstring); None after saying why (``bad``)."""
    folder = Path(s.run_dir)
    found = kept_tokenizer(folder, base.name)  # no stage result (a summary judged in memory): the summary's record
    ev = base.result(EvaluateResult)
    kept, sha = found if found is not None else (ev.tokenizer_file, ev.tokenizer_sha256)
    where = f"{base.name}: evaluate.tokenizer_file"
    if kept:
        try:
            got = safeio.sha256(kept, "run_file")
        except (OSError, safeio.UnsafeRead) as e:
            bad(where, f"the baseline's tokenizer copy {kept} cannot be read ({e}): the token counts cannot be "
                "recomputed", FIX_PLAN)
            return None
        if got != sha:
            bad(where, f"{kept} was changed after the evaluation: sha256 {got} but the evaluate result recorded {sha}",
                FIX_PLAN)
            return None
        count = perplexity.token_counter_file(kept)
    else:
        config = planned_evaluation(folder, base.name) or {}
        model = config["engine"].get("model") if isinstance(config.get("engine"), dict) else None
        count = perplexity.token_counter(model) if isinstance(model, str) else None
        kept = f"{model}/tokenizer.json" if isinstance(model, str) else "(no planned model: plan.json)"
    if count is None:
        bad(where, f"no readable tokenizer at {kept} to recompute the perplexity delta with (a run made before the "
            "evaluate stage kept a copy reads the planned model's)",
            "rerun the baseline's evaluation, which keeps its tokenizer in the run folder")
    return count
