"""What a recipe refers to, checked: model folder, data, calibration sets, tasks, gates, output_dir, what vLLM serves."""

from __future__ import annotations

import math
import tempfile

from suite.runtime.errors import Problem, SuiteError
from suite.recipe.loaded import LoadedRecipe


PERPLEXITY_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")  # = suite.analysis.paired.PPL_METRICS


def is_perplexity(info) -> bool:
    """A local task whose headline metric is a perplexity (lower is better; paired by document)."""
    return (info.primary_metric or "").split(",")[0] in PERPLEXITY_METRICS


def check_references(loaded: LoadedRecipe, serving: bool = True) -> list[Problem]:
    """Checks that need the file system: model folder, data dir, calibration sets, task names."""
    from suite.stages.quantize import calibration
    from suite.stages.evaluate import tasks  # local: both read small YAML registries

    r, f = loaded.recipe, str(loaded.path)
    problems: list[Problem] = []
    if loaded.model_is_local() and not (loaded.resolve(r.model.id) / "config.json").is_file():
        problems.append(
            Problem(f, "model.id", f"no model folder with config.json at {loaded.resolve(r.model.id)}",
                    "run scripts/setup.sh (demo model) or give a Hugging Face id / an existing folder")
        )
    known_sets = calibration.available()
    for i, v in enumerate(r.variants):
        q = v.quantization
        for ref, _ in calibration.mix_parts(q.calibration) if q and q.calibration else []:
            fld = f"variants[{i}].quantization.calibration"
            if calibration.is_file_ref(ref):
                path = loaded.resolve(ref)
                try:
                    spec, _ = calibration.resolve(str(path))
                    files = calibration.data_files(spec, path)
                    if spec.path and not all(p.is_file() for p in files) or spec.path and not files:
                        problems.append(Problem(f, fld, f"{path}: data file(s) {spec.path!r} not found",
                                                "fix 'path' in the set YAML (relative to it)"))
                except (OSError, ValueError) as e:
                    problems.append(Problem(f, fld, f"{path}: not a calibration set: {str(e).splitlines()[0]}",
                                            "see calibration/*.yaml for the format"))
            elif ref not in known_sets:
                problems.append(Problem(f, fld, f"unknown calibration set {ref!r}",
                                        f"use one of: {', '.join(sorted(known_sets)) or '(none found)'}, "
                                        f"add calibration/{ref}.yaml, or give a set YAML path"))
    if r.model.weights == "random" and r.eval.tasks:
        problems.append(Problem(f, "eval.tasks", "model.weights is 'random': accuracy on random weights means nothing",
                                "remove eval.tasks (a throughput-only recipe) or use real weights"))
    data_dir = loaded.resolve(r.eval.data_dir)
    if r.eval.tasks and not data_dir.is_dir():
        problems.append(Problem(f, "eval.data_dir", f"folder not found: {data_dir}",
                                "point it at a folder laid out like ../shared/data"))
    local = tasks.available()
    hub_names = None
    if any(t.name not in local for t in r.eval.tasks):  # asked of the serve environment's lm-eval, once
        from suite.runtime.envs import lm_eval_task_names

        try:
            hub_names = lm_eval_task_names()
        except SuiteError as e:
            problems += [Problem(f, "eval.tasks", f"standard lm-eval task names could not be listed: {p.message}",
                                 p.fix) for p in e.problems]
    if r.gates.max_perplexity_increase is not None and not any(
            t.name in local and is_perplexity(local[t.name]) for t in r.eval.tasks):
        problems.append(Problem(f, "gates.max_perplexity_increase", "no perplexity task in eval.tasks: the gate would "
                                "have nothing to judge", "add suite_longppl to eval.tasks, or remove the gate"))
    for i, t in enumerate(r.eval.tasks):
        standard = (t.name in tasks.STANDARD_PRIMARY_METRIC) if hub_names is None else t.name in hub_names
        if t.name not in local and not standard:
            near = tasks.suggest(t.name, local)
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"unknown task {t.name!r}" + (f"; did you mean {near!r}?" if near else ""),
                        "use a task from tasks/ (`suite tasks`) or a standard lm-eval task name")
            )
        elif t.name in local and not local[t.name].higher_is_better and not is_perplexity(local[t.name]):
            problems.append(Problem(f, f"eval.tasks[{i}].name", "its metric is neither 'higher is better' nor a "
                                    "perplexity (the summary pairs perplexity tasks apart)", "pick another task"))
        missing = [f for f in tasks.data_files(t.name) if not (data_dir / f).is_file()] if data_dir.is_dir() else []
        if missing:
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"{t.name}: {len(missing)} data file(s) missing under {data_dir}, "
                        f"e.g. {missing[0]}", "point eval.data_dir at a folder laid out like ../shared/data "
                        "(`suite data check DIR`)"))
        if tasks.needs_code_execution(t.name) and not r.eval.allow_code_execution:
            problems.append(
                Problem(f, f"eval.tasks[{i}].name", f"{t.name} runs model-written code",
                        "set eval.allow_code_execution: true to allow it (sandboxed subprocess), or drop the task")
            )
    from suite.recipe.schema import DEFAULTS, PER_TASK  # the gate's own lists: `suite gate` refuses the same

    evaluated = {t.name for t in r.eval.tasks}
    for gate in PER_TASK:
        for task, value in getattr(r.gates, gate).items():
            if task not in evaluated:
                problems.append(Problem(f, f"gates.{gate}.{task}", "gate on a task that is not evaluated",
                                        "add the task to eval.tasks or remove the gate"))
            elif not math.isfinite(value):
                problems.append(Problem(f, f"gates.{gate}.{task}", f"threshold {value} is not a finite number",
                                        "give a finite threshold"))
    for gate, value in r.gates.model_dump().items():
        if gate in DEFAULTS and value is not None and not evaluated:
            problems.append(Problem(f, f"gates.{gate}", "an accuracy gate, but eval.tasks is empty: it checks nothing",
                                    "add eval.tasks or remove the gate"))
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(Problem(f, f"gates.{gate}", f"threshold {value} is not a finite number",
                                    "give a finite threshold"))
    problems += served_problems(loaded)
    from suite.recipe import kv

    problems += kv.reference_problems(loaded)
    problems += output_dir_problems(loaded)
    if serving:
        problems += serving_problems(loaded)
    return problems


def served_problems(loaded: LoadedRecipe) -> list[Problem]:
    """``eval.engine: served`` scores the tasks on the benchmark stage's vllm serve: it needs a throughput
    section, and greedy tasks (sampling pairs no item with the offline backend; a standard lm-eval task's
    settings are only known at run time, where the served model refuses one that samples)."""
    from suite.stages.evaluate import tasks

    r, f = loaded.recipe, str(loaded.path)
    if r.eval.engine != "served" or not r.eval.tasks:
        return []
    problems = []
    if r.throughput is None:
        problems.append(Problem(f, "eval.engine", "'served' scores the tasks on the benchmark stage's vllm serve, and "
                                "this recipe has no throughput section (no server is started)",
                                "add a throughput section, or set eval.engine: vllm"))
    for i, t in enumerate(r.eval.tasks):
        if tasks.samples(t.name):
            problems.append(Problem(f, f"eval.tasks[{i}].name", f"{t.name} samples its generations (do_sample / "
                                    "temperature > 0): served scoring pairs with the offline backend only when greedy "
                                    "(one seeded stream offline, a seed per request on a server)",
                                    "set eval.engine: vllm, or drop the task"))
    return problems


def output_dir_problems(loaded: LoadedRecipe) -> list[Problem]:
    """output_dir must be a folder this user can write in, or creatable as one (nothing is created here:
    a probe file is made and removed in the folder, or in its nearest existing parent)."""
    out = loaded.resolve(loaded.recipe.output_dir)
    f, fld = str(loaded.path), "output_dir"
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "is a file, not a folder" if existing == out else f"cannot be made: {existing} is a file"
        return [Problem(f, fld, f"{out} {what}", "point output_dir at a folder (it is made if missing)")]
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".suite-write-check-"):
            pass
    except OSError as e:
        what = "is not writable" if existing == out else f"cannot be made: {existing} is not writable"
        return [Problem(f, fld, f"{out} {what} ({e.strerror or e})",
                        "point output_dir at a folder you can write in (run folders, checkpoints and the "
                        "evaluation cache go there)")]
    return []


def serving_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Variants the serve environment's vLLM build cannot serve (suite.runtime.envs.platform_problems), and
    engine arguments its ``EngineArgs`` does not take (name, type, choices), as Problems."""
    from suite.runtime.engine.args import check_engine_args
    from suite.runtime.envs import engine_args_facts, platform_problems

    f = str(loaded.path)
    problems = [Problem(f, fld, msg, fix) for fld, msg, fix in platform_problems(loaded.recipe)]
    r = loaded.recipe
    from suite.runtime.envs import vllm_platform
    from suite.recipe import kv

    try:
        problems += kv.serving_problems(loaded, engine_args_facts, vllm_platform())
    except SuiteError as e:
        problems += [Problem(f, "kv_scales", f"cannot check the KV-cache options: {p.message}", p.fix)
                     for p in e.problems]
    sections = [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)] + [("eval", r.eval)]
    if any(v.engine_args for _, v in sections):
        try:
            facts = engine_args_facts()
        except SuiteError as e:
            return problems + [Problem(f, "engine_args", f"cannot check engine arguments: {p.message}", p.fix)
                               for p in e.problems]
        for where, v in sections:
            problems += [Problem(f, f"{where}.engine_args.{key}", msg, fix)
                         for key, msg, fix in check_engine_args(v.engine_args, facts)[1]]
    return problems
