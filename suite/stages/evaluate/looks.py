"""eval.sequential in the evaluate stage: every task's items scored in a seeded order, in looks, on one engine.

Each look is one ``simple_evaluate`` per n-shot over the leaf tasks that have items in it, with lm-eval's
``samples={leaf: [document index, ...]}``: lm-eval takes the listed documents in dataset order and logs each with
its true ``doc_id`` when the list is sorted (it maps positions back through the list), and reads an empty list as
"every document", so a leaf with no items in a look is left out of the call. ``limit`` and ``samples`` exclude each
other in lm-eval, so a task's ``limit`` is applied here: its items are its leaves' first documents, as lm-eval's
``limit`` takes them. A variant (``SequentialConfig.margins``) reads the baseline's per-item scores after each look
and stops a task once ``suite.runtime.sequential.run`` decides it; the baseline scores every look. Headline scores
are the mean of the items' scores (what lm-eval's mean metrics and size-weighted groups report over them).
"""

from __future__ import annotations

import logging
import math
from itertools import groupby
from pathlib import Path

from suite.records.evaluate import EvaluateConfig, EvaluateResult, SequentialTask, TaskRun, TaskScore
from suite.runtime import safeio, sequential as seq
from suite.stages.evaluate import tasks as task_registry

log = logging.getLogger(__name__)



def leaf_sizes(task_manager, name: str) -> dict[str, int]:
    """{leaf task: its documents} for a task or group, from lm-eval's task objects."""
    from lm_eval.tasks import get_task_dict

    out: dict[str, int] = {}

    def walk(d):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v)
            else:
                out[k if isinstance(k, str) else v.config.task] = len(v.eval_docs)

    walk(get_task_dict([name], task_manager))
    return out


def task_items(task: TaskRun, sizes: dict[str, int]) -> list[tuple[str, int]]:
    """The task's items as (leaf, document index): each leaf's documents, its first ``limit`` where set (a count,
    or a fraction rounded up, as lm-eval's limit)."""
    def take(n: int) -> int:
        if task.limit is None:
            return n
        return min(n, int(task.limit) if task.limit >= 1 else math.ceil(n * task.limit))

    return [(leaf, i) for leaf, n in sorted(sizes.items()) for i in range(take(n))]


def item_score(row: dict, metric: str) -> float | None:
    """The row's score for 'metric,filter' (None: a row of another filter)."""
    name, _, filt = metric.partition(",")
    if row.get("filter", "none") != (filt or "none") or not isinstance(row.get(name), (int, float, bool)):
        return None
    return float(row[name])


def baseline_scores(config: EvaluateConfig, metrics: dict[str, str]) -> dict[str, dict[tuple[str, int], float]]:
    """task -> {(leaf, doc_id): score} from the baseline's result, which must have been scored in the same looks."""
    path = Path(config.sequential.baseline_result)
    base = EvaluateResult.read(path)
    if not base.sequential or any((s.looks_planned, s.seed) != (config.sequential.looks, config.sequential.seed)
                                     for s in base.sequential.values()):
        raise ValueError(f"{path}: the baseline was not scored in eval.sequential's {config.sequential.looks} looks "
                         f"(seed {config.sequential.seed}) (fix: rerun its evaluation with the recipe's "
                         "eval.sequential)")
    out = {}
    for task, metric in metrics.items():
        f = Path(base.samples_files.get(task, ""))
        if not f.is_absolute():  # a name relative to the run folder (variants/<name>/<stage>.result.json's ../..)
            f = path.resolve().parents[2] / f
        scores = {}
        for row in safeio.iter_jsonl(f, "samples"):  # regular file, line and size caps, nesting bounded
            if (s := item_score(row, metric)) is not None:
                scores[(row["task"], int(row["doc_id"]))] = s
        out[task] = scores
    return out


class Looks:
    """One evaluation's looks: what each task scores at each look, what it has scored, and what is decided."""

    def __init__(self, config: EvaluateConfig, task_manager, metrics: dict[str, str]):
        self.config, self.spec, self.metrics = config, config.sequential, metrics
        self.items = {t.name: task_items(t, leaf_sizes(task_manager, t.name)) for t in config.tasks}
        self.plan = {t: seq.look_items(keys, self.spec.seed, self.spec.looks) for t, keys in self.items.items()}
        self.leaves = {t: sorted({leaf for leaf, _ in keys}) for t, keys in self.items.items()}
        self.base = baseline_scores(config, metrics) if self.spec.baseline_result else {}
        self.open = [t.name for t in config.tasks]
        self.scored = {t: 0 for t in self.items}  # looks scored
        self.rows: dict[str, list[dict]] = {}  # leaf -> its samples, every look
        self.decided: dict[str, seq.SequentialResult] = {}

    def samples(self, k: int, tasks: list[TaskRun]) -> dict[str, list[int]]:
        """lm-eval's ``samples`` for look ``k`` of ``tasks`` still open: sorted document indices per leaf."""
        out: dict[str, list[int]] = {}
        for t in tasks:
            for leaf, i in self.plan[t.name][k] if k < len(self.plan[t.name]) else []:
                out.setdefault(leaf, []).append(i)
        return {leaf: sorted(ix) for leaf, ix in out.items()}

    def item_scores(self, task: str) -> dict[tuple[str, int], float]:
        return {(leaf, int(r["doc_id"])): s for leaf in self.leaves[task] for r in self.rows.get(leaf, [])
                if (s := item_score(r, self.metrics[task])) is not None}

    def judge(self, task: str) -> None:
        """After a look: the task's sequential test on the items scored so far, paired with the baseline's."""
        margin = self.spec.margins.get(task)
        if margin is None or not self.base:
            return
        mine, theirs = self.item_scores(task), self.base[task]
        order = [key for part in self.plan[task][:self.scored[task]] for key in part]
        if missing := [key for key in order if key not in mine or key not in theirs]:
            raise ValueError(f"{task}: {len(missing)} items of the looks scored have no score in the variant's or "
                             f"the baseline's samples (e.g. {missing[0]})")
        res = seq.run([mine[key] - theirs[key] for key in order], margin, self.spec.looks,
                      n_items=len(self.items[task]))
        self.decided[task] = res
        if res.decision in (seq.PASS, seq.FAIL) and len(order) < len(self.items[task]):
            log.info("evaluate: %s stopped at look %d of %d (%s, %d of %d items)", task, self.scored[task],
                     self.spec.looks, res.decision, len(order), len(self.items[task]))
            self.open.remove(task)

    def records(self) -> dict[str, SequentialTask]:
        out = {}
        for task, keys in self.items.items():
            used = sum(len(p) for p in self.plan[task][:self.scored[task]])
            res = self.decided.get(task)
            out[task] = SequentialTask(
                metric=self.metrics[task], margin=self.spec.margins.get(task), n_items=len(keys),
                seed=self.spec.seed, looks_planned=self.spec.looks, looks_scored=self.scored[task], items_used=used,
                items_saved=len(keys) - used, decision=res.decision if res else "unjudged",
                looks=[vars(x) for x in res.looks] if res else [])
        return out


def score_in_looks(config: EvaluateConfig, lm, task_manager, evaluate) -> tuple[dict, list[TaskScore], dict]:
    """The looks, each one ``evaluate(tasks=..., samples=..., num_fewshot=...)`` call per n-shot (lm-eval's
    simple_evaluate with the stage's other arguments bound). Returns lm-eval's merged output (samples per leaf,
    a group's leaves in group_subtasks), a score per task, and the sequential records."""
    metrics = {t.name: task_registry.primary_metric(t.name, t.metric) for t in config.tasks}
    if none := [t for t, m in metrics.items() if m is None]:
        raise ValueError(f"eval.sequential: {none[0]} has no known headline metric (fix: set its metric in eval.tasks)")
    looks = Looks(config, task_manager, metrics)
    merged: dict = {"results": {}, "n-samples": {}, "configs": {}, "group_subtasks": {}, "task_hashes": {},
                    "versions": {}}
    fewshot = lambda t: t.num_fewshot if t.num_fewshot is not None else -1  # noqa: E731
    for k in range(config.sequential.looks):
        tasks = [t for t in config.tasks if t.name in looks.open]
        for shots, group in groupby(sorted(tasks, key=fewshot), key=fewshot):
            samples = looks.samples(k, list(group))
            if not samples:
                continue
            res = evaluate(tasks=sorted(samples), samples=samples, num_fewshot=None if shots < 0 else shots)
            for part in ("configs", "task_hashes", "versions"):
                merged[part].update(res.get(part) or {})
            for leaf, rows in (res.get("samples") or {}).items():
                looks.rows.setdefault(leaf, []).extend(rows)
        for t in tasks:
            looks.scored[t.name] = min(k + 1, len(looks.plan[t.name]))
            looks.judge(t.name)
        if not looks.open:
            break
    scores = [_score(t, metrics[t.name], looks) for t in config.tasks]
    for t in config.tasks:
        if looks.leaves[t.name] != [t.name]:
            merged["group_subtasks"][t.name] = looks.leaves[t.name]
        merged["results"][t.name] = {metrics[t.name]: next(s.value for s in scores if s.task == t.name)}
    merged["samples"] = looks.rows
    return merged, scores, looks.records()


def _score(task: TaskRun, metric: str, looks: Looks) -> TaskScore:
    """The task's headline over the items it scored: their mean and its standard error (lm-eval's for a mean)."""
    values = list(looks.item_scores(task.name).values())
    n = len(values)
    if not n:
        raise RuntimeError(f"{task.name}: no item scored for {metric!r}")
    mean = sum(values) / n
    stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else None
    return TaskScore(task=task.name, metric=metric, value=mean, stderr=stderr, n=n, all_metrics={metric: mean})
