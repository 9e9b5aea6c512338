"""The Python API: run a recipe, read a run folder as tables, gate it (the CLI's commands call these too).

    import suite
    run = suite.run("recipes/demo-cpu.yaml", eval={"limit": 4}, track=False)   # -> suite.Run
    run = suite.load_run("runs/20261205-120000-demo-cpu")
    run.variants()     # pandas: one row per variant, its summary metrics as columns
    run.items()        # pandas: one row per scored item (variant, task, subtask, doc_id, metric, score)
    run.points()       # pandas: one row per load point (variant, label, request_rate, output_tok_s, ...)
    run.gate()         # the recipe's gates (or gate(policy="policy.yaml")): a GateResult with .outcome
    run.report()       # report.html in the run folder

Keyword overrides of ``run`` are merged into the recipe's YAML mapping before it is validated (nested
mappings merge, anything else replaces), so the run folder's recipe.yaml is exactly what ran. Reading a run
never imports vLLM, lm-eval or torch; the frames need pandas (the serve environment has it).
"""

from __future__ import annotations

import copy
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from suite.analysis import derive
from suite.analysis.paired import is_perplexity_metric, item_scores
from suite.orchestrate.runner import execute
from suite.outputs import report as report_page
from suite.outputs.tracking_target import check_uris
from suite.recipe import load_recipe
from suite.recipe.checks import output_folder_problems
from suite.recipe.load import MAX_DEPTH, load_run_recipe, load_yaml, read_text
from suite.runtime.errors import Problem, SuiteError
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.runtime.lock import refuse_live


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


MAX_OVERRIDE_NODES = 100_000  # values in one call's overrides (a recipe has a few hundred)
MAX_OVERRIDE_BYTES = 1 << 20  # the merged recipe's YAML (a recipe is a few KB)


def override_problems(overrides: dict) -> list[Problem]:
    """The bounds a recipe file is held to, for keyword overrides: plain YAML values only (mappings with string
    keys, lists, strings, numbers, booleans, None), nested at most as deep as a recipe may be, and not too many
    (read without recursion: a cycle or 100,000 levels is refused, not a RecursionError)."""
    stack, seen = [(k, v, 1) for k, v in overrides.items()], 0
    while stack:
        where, value, depth = stack.pop()
        seen += 1
        if depth > MAX_DEPTH or seen > MAX_OVERRIDE_NODES:
            what = f"nested more than {MAX_DEPTH} levels deep" if depth > MAX_DEPTH else \
                f"more than {MAX_OVERRIDE_NODES} values"
            return [Problem("suite.run", where, f"the override is {what}: no recipe needs that",
                            "give the fields to change, as a recipe writes them")]
        if isinstance(value, dict):
            bad = next((k for k in value if not isinstance(k, str)), None)
            if bad is not None:
                return [Problem("suite.run", where, f"a key that is not a string ({type(bad).__name__})",
                                "give mapping keys as strings, as a recipe writes them")]
            stack += [(f"{where}.{k}", v, depth + 1) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            stack += [(f"{where}[{i}]", v, depth + 1) for i, v in enumerate(value)]
        elif not (value is None or isinstance(value, (str, int, float, bool))):
            return [Problem("suite.run", where, f"a {type(value).__name__} is not a YAML value",
                            "give strings, numbers, booleans, lists and mappings")]
    return []


def load(recipe: str | Path, serving: bool = True, **overrides: Any):
    """A validated recipe (``suite.recipe.LoadedRecipe``), with ``overrides`` merged into its mapping: its text is
    the merged recipe, which a run copies into its folder (so `--resume` and `suite gate` read what ran)."""
    path = Path(recipe)
    if not overrides:
        return load_recipe(path, serving=serving)
    if not path.is_file():
        raise SuiteError(Problem(str(path), "", "recipe file not found", "check the path"))
    if problems := override_problems(overrides):
        raise SuiteError(problems)

    data = load_yaml(read_text(path), str(path))
    if not isinstance(data, dict):
        raise SuiteError(Problem(str(path), "", "a recipe is a YAML mapping", "start from recipes/demo-cpu.yaml"))
    text = yaml.safe_dump(_merge(data, overrides), sort_keys=False, allow_unicode=True)
    if len(text.encode("utf-8")) > MAX_OVERRIDE_BYTES:
        raise SuiteError(Problem(str(path), "", f"the recipe with its overrides is over {MAX_OVERRIDE_BYTES >> 10} KiB "
                                 "of YAML: no recipe needs that", "give the fields to change, as a recipe writes them"))
    return load_recipe(path, serving=serving, text=text)


@dataclass
class Run:
    """One run folder: its summary (``suite.records.summary.RunSummary``) and tables read from its files."""

    run_dir: Path
    summary: Any

    def variants(self):
        """One row per variant: name, baseline flag, errors, and every summary metric as a column."""
        import pandas as pd

        rows = [{"variant": v.name, "is_baseline": v.is_baseline, "errors": "; ".join(v.errors), **v.metrics}
                for v in self.summary.variants]
        return pd.DataFrame(rows).set_index("variant")

    def items(self):
        """One row per scored item of every accuracy task: variant, task, subtask, doc_id, metric, score
        (lm-eval's samples files the evaluate stage kept, on the task's headline metric)."""
        import pandas as pd

        rows = []
        for v in self.summary.variants:
            if (ev := v.result(EvaluateResult)) is None:
                continue
            for s in ev.scores:
                f = ev.samples_files.get(s.task)
                if not f or is_perplexity_metric(s.metric):
                    continue
                path = self._file(f)
                for (subtask, doc_id), score in item_scores(path, s.metric).items():
                    rows.append({"variant": v.name, "task": s.task, "subtask": subtask, "doc_id": doc_id,
                                 "metric": s.metric, "score": score})
        return pd.DataFrame(rows, columns=["variant", "task", "subtask", "doc_id", "metric", "score"])

    def points(self):
        """One row per load point of every variant's benchmark (the LoadPoint record's fields)."""
        import pandas as pd

        rows = []
        for v in self.summary.variants:
            for p in (b.points if (b := v.result(BenchmarkResult)) else []):
                rows.append({"variant": v.name, **p.model_dump(exclude_none=False)})
        return pd.DataFrame(rows)

    def gate(self, policy: str | Path | None = None, recipe: str | Path | None = None):
        """The release gate on this run (``suite gate``): a GateResult with .outcome ("bad input" with .problems when
        no verdict can be given). The gates are the run folder's recipe.yaml under the sha256 the run recorded, or
        those of ``recipe`` (under the same check) or of a ``policy`` file; never summary.json's own copy."""
        return self.verdict(policy, recipe).result

    def verdict(self, policy: str | Path | None = None, recipe: str | Path | None = None):
        """``gate`` with where its gates came from (``suite.analysis.gate.Verdict``: result, label, policy_sha256,
        looser): what `suite gate` prints."""
        from suite.analysis import gate  # lazy: scipy (0.6 s, a serve extra): load_run and the tables work without it

        return gate.verdict(self.summary, self.run_dir, str(policy) if policy else None,
                            str(recipe) if recipe else None)

    def report(self, out: str | Path | None = None) -> Path:
        """The run's HTML report (``suite report``), with the verdict ``gate`` gives; written to ``out``, by default
        report.html in this run folder (not wherever summary.json says the run was)."""
        page = Path(out) if out else self.run_dir / "report.html"
        verdict = report_page.recipe_verdict(self.summary, self.run_dir)
        return report_page.run(report_page.ReportConfig(self.summary, page, gate=verdict)).html

    def _file(self, recorded: str) -> Path:
        """A file the run recorded: its name was resolved against this run folder when the summary was read
        (suite.records.paths), wherever the folder is now."""
        p = Path(recorded)
        if p.is_file():
            return p
        raise SuiteError(Problem(recorded, "", "a file the run recorded is missing",
                                 f"give the complete run folder ({self.run_dir})"))


def load_run(run_dir: str | Path, who: str = "suite.load_run") -> Run:
    """A finished (or partial) run folder (or its summary.json's path), read: the summary its records give
    (``suite.analysis.derive.read_run``; summary.json is a cache, never read for a figure). A run in progress (its
    run.lock held by a live `suite run`) is refused (SuiteError naming ``who`` asked: a command or the API)."""
    p = Path(run_dir)
    folder = p if p.is_dir() else p.parent
    refuse_live(folder, who)
    return Run(run_dir=folder, summary=derive.read_run(folder))


# what a run's own process imports after the stages (suite.analysis.paired: scipy; suite.outputs: matplotlib): in the
# serve extras, not the wheel's base dependencies. An installed wheel without them ran every stage, then died
# (ModuleNotFoundError: scipy) after 2 min 37 s of the demo (docs/guide-notes/finish.md)
RUN_MODULES = ("scipy", "matplotlib")


def missing_for_run() -> list[str]:
    """The modules of RUN_MODULES this environment cannot import."""
    return [m for m in RUN_MODULES if importlib.util.find_spec(m) is None]


def run(recipe: str | Path, *, output_dir: str | Path | None = None, track: bool = True, force: bool = False,
        resume: str | Path | None = None, report: Optional[Callable[..., None]] = None,
        watch: Optional[Callable[[list, list], None]] = None, accept_recipe_change: bool = False,
        **overrides: Any) -> Run:
    """Run a recipe end to end (``suite run``): ``overrides`` are merged into its mapping first; ``resume``
    continues a run folder instead (with the recipe it was made from; no overrides then). ``recipe`` may also be
    a recipe already loaded (``load``). ``report`` and ``watch`` receive the runner's events (see
    ``suite.orchestrate.runner.Reporter``: the job events, ("run", "", "started", run folder) and the stages'
    progress counts). ``accept_recipe_change``: resume although the run folder's recipe.yaml changed since the
    run started (the summary and `suite gate` then say which fields)."""
    if missing := missing_for_run():
        raise SuiteError(Problem("environment", "suite run", f"{', '.join(missing)} not installed: a run's analysis "
                                 "and report need them in this environment, after the stages",
                                 "install the suite with its serve extra: pip install 'suite[serve-cpu]' (or "
                                 "[serve-gpu]) -c constraints/cpu.txt"))
    loaded_given = hasattr(recipe, "recipe")  # already a LoadedRecipe (the CLI's, with --executor applied)
    if loaded_given and overrides:
        raise SuiteError(Problem(str(recipe.path), "", "overrides apply to a recipe file, not a loaded recipe",
                                 "give the recipe's path"))
    if resume is not None:
        if overrides:
            raise SuiteError(Problem(str(resume), "", "a resumed run keeps the recipe it was made from",
                                     "drop the overrides, or start a new run"))

        loaded, resume_dir = (recipe if loaded_given else load_run_recipe(Path(resume))), Path(resume)
    else:
        loaded, resume_dir = (recipe if loaded_given else load(recipe, **overrides)), None
    _check_places(loaded, output_dir, track)
    summary = execute(loaded, Path(output_dir) if output_dir else None, report, track=track, force=force,
                      resume=resume_dir, watch=watch, accept_recipe_change=accept_recipe_change)
    return Run(run_dir=Path(summary.run_dir), summary=summary)


def _check_places(loaded, output_dir: str | Path | None, track: bool) -> None:
    """Before anything is made: ``output_dir`` (`suite run --out`) is held to the rules of the recipe's output_dir,
    and with ``track`` no tracking URI (the recipe's, MLflow's environment's) holds a credential."""
    if output_dir is not None and (problems := output_folder_problems(Path(output_dir).resolve(), "suite run",
                                                                        "--out (output_dir)")):
        raise SuiteError(problems)
    if track:
        check_uris(None, loaded.recipe.tracking.uri)
