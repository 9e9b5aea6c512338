"""What a recipe refers to, checked: model folder, data, calibration sets, tasks, gates, output_dir, what vLLM serves."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from suite.recipe import checkpoint, consent, guards, kv
from suite.recipe.gatespec import DEFAULTS, PER_TASK  # the gate's own lists: `suite gate` refuses the same
from suite.recipe.loaded import LoadedRecipe
from suite.records import bench_argv
from suite.runtime import envs
from suite.runtime.engine.args import check_engine_args
from suite.runtime.engine.determinism import platform_problem
from suite.runtime.errors import Problem, SuiteError
from suite.stages.benchmark.workload import dataset_rows
from suite.stages.evaluate import tasks
from suite.stages.quantize import calibration


PERPLEXITY_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")  # = suite.analysis.paired.PPL_METRICS


def is_perplexity(info) -> bool:
    """A local task whose headline metric is a perplexity (lower is better; paired by document)."""
    return (info.primary_metric or "").split(",")[0] in PERPLEXITY_METRICS


def headline_metric(task: str, metric: str | None = None) -> str | None:
    """The 'metric,filter' the evaluate stage scores ``task`` on: the recipe's ``metric``, else the task's declared
    headline (tasks/: metadata.suite_primary_metric; a standard lm-eval name: its table); None: neither, and the
    stage takes the first metric lm-eval reports (suite.stages.evaluate.stage.task_score)."""
    return tasks.primary_metric(task, metric)


def task_leaves(task: str) -> set[str] | None:
    """The names a task's per-item records may carry in their ``task`` field: the task itself and, for a group of
    tasks/, every subtask down to the leaves (the evaluate stage writes a group's rows under their leaf's name);
    None: not a task of tasks/ (a standard lm-eval name, or one of eval.include_path), its subtasks unknown here."""
    known = tasks.available()
    if task not in known:
        return None
    out, todo = {task}, [task]
    while todo:
        info = known.get(todo.pop())
        for sub in info.subtasks if info is not None else ():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def check_references(loaded: LoadedRecipe, serving: bool = True) -> list[Problem]:
    """Checks that need the file system: model folder, data dir, calibration sets, task names."""
    problems = model_folder_problems(loaded)
    problems += guards.model_problems(loaded) + guards.engine_range_problems(loaded)
    problems += calibration_problems(loaded)
    problems += task_problems(loaded)
    problems += gate_problems(loaded)
    problems += served_problems(loaded)
    problems += checkpoint_problems(loaded, serving)
    problems += traffic_problems(loaded, serving)
    problems += consent.consent_problems(loaded)
    problems += kv.reference_problems(loaded)
    problems += output_dir_problems(loaded)
    if serving:
        problems += serving_problems(loaded)
    return problems


def model_folder_problems(loaded: LoadedRecipe) -> list[Problem]:
    """A local ``model.id`` must be a folder with config.json; a missing folder must not pass for a hub id."""
    r, f = loaded.recipe, str(loaded.path)
    if loaded.model_is_local() and not (loaded.resolve(r.model.id) / "config.json").is_file():
        return [Problem(f, "model.id", f"no model folder with config.json at {loaded.resolve(r.model.id)}",
                        "run scripts/setup.sh (demo model) or give a Hugging Face id / an existing folder")]
    if not loaded.model_is_local() and loaded.resolve(r.model.id.split("/")[0]).is_dir():
        # 'models/typo' reads as a hub id only because the folder is missing: its first part is a folder here
        return [Problem(f, "model.id", f"no model folder at {loaded.resolve(r.model.id)} (its parent "
                        f"{loaded.resolve(r.model.id.split('/')[0])} is a folder here, so this is no hub id)",
                        "give an existing folder, or the Hugging Face id (org/name) from a folder without such a "
                        "subfolder")]
    return []


def calibration_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Each variant's calibration sets: a set YAML path whose data files exist, or a set name under calibration/."""
    r, f = loaded.recipe, str(loaded.path)
    problems: list[Problem] = []
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
    return problems


def task_problems(loaded: LoadedRecipe) -> list[Problem]:
    """``eval.tasks`` as a whole (real weights, a data folder, a perplexity task for the perplexity gate), then each
    task: known, with a usable metric, its data files present, code execution allowed where it needs it."""
    r, f = loaded.recipe, str(loaded.path)
    problems: list[Problem] = []
    if r.model.weights == "random" and r.eval.tasks:
        problems.append(Problem(f, "eval.tasks", "model.weights is 'random': accuracy on random weights means nothing",
                                "remove eval.tasks (a throughput-only recipe) or use real weights"))
    data_dir = loaded.resolve(r.eval.data_dir)
    if r.eval.tasks and not data_dir.is_dir():
        problems.append(Problem(f, "eval.data_dir", f"folder not found: {data_dir}",
                                "point it at a folder laid out like ../shared/data"))
    local, include_problems = include_path_tasks(loaded)
    problems += include_problems
    hub_names, hub_problems = _hub_task_names(loaded, local)
    problems += hub_problems
    if r.gates.max_perplexity_increase is not None and not any(
            t.name in local and is_perplexity(local[t.name]) for t in r.eval.tasks):
        problems.append(Problem(f, "gates.max_perplexity_increase", "no perplexity task in eval.tasks: the gate would "
                                "have nothing to judge", "add suite_longppl to eval.tasks, or remove the gate"))
    for i, t in enumerate(r.eval.tasks):
        problems += _one_task_problems(loaded, i, t.name, local, hub_names, data_dir)
        if r.eval.sequential is not None and t.name in local and is_perplexity(local[t.name]):
            problems.append(Problem(f, f"eval.tasks.{i}", f"{t.name} is a perplexity, paired by document, not judged "
                                    "in eval.sequential's looks", "score it in a recipe without eval.sequential"))
    return problems


def _hub_task_names(loaded: LoadedRecipe, local: dict) -> tuple[set | None, list[Problem]]:
    """The serve environment's lm-eval task names, asked once and only when a task is not a local one (None
    then, or when they could not be listed: the problems say why)."""
    if all(t.name in local for t in loaded.recipe.eval.tasks):
        return None, []

    try:
        return envs.lm_eval_task_names(), []
    except SuiteError as e:
        return None, [Problem(str(loaded.path), "eval.tasks", f"standard lm-eval task names could not be listed: "
                              f"{p.message}", p.fix) for p in e.problems]


def _one_task_problems(loaded: LoadedRecipe, i: int, name: str, local: dict, hub_names, data_dir) -> list[Problem]:
    """``eval.tasks[i]``: a local or standard lm-eval task, with a usable metric, its data files, code execution."""
    f, fld, problems = str(loaded.path), f"eval.tasks[{i}].name", []
    standard = (name in tasks.STANDARD_PRIMARY_METRIC) if hub_names is None else name in hub_names
    if name not in local and not standard:
        near = tasks.suggest(name, local)
        problems.append(Problem(f, fld, f"unknown task {name!r}" + (f"; did you mean {near!r}?" if near else ""),
                                "use a task from tasks/ (`suite tasks`) or a standard lm-eval task name"))
    elif name in local and not local[name].higher_is_better and not is_perplexity(local[name]):
        problems.append(Problem(f, fld, "its metric is neither 'higher is better' nor a "
                                "perplexity (the summary pairs perplexity tasks apart)", "pick another task"))
    missing = [m for m in tasks.data_files(name) if not (data_dir / m).is_file()] if data_dir.is_dir() else []
    if missing:
        problems.append(Problem(f, fld, f"{name}: {len(missing)} data file(s) missing under {data_dir}, "
                                f"e.g. {missing[0]}", f"point eval.data_dir at a folder that holds {name}'s files, laid out "
                                "like ../shared/data (`suite data prepare DIR` builds one from the hub)"))
    if tasks.needs_code_execution(name) and not loaded.recipe.eval.allow_code_execution:
        problems.append(Problem(f, fld, f"{name} runs model-written code",
                                "set eval.allow_code_execution: true to allow it (sandboxed subprocess), or drop "
                                "the task"))
    return problems


def gate_problems(loaded: LoadedRecipe) -> list[Problem]:
    """The gates: a per-task gate names an evaluated task, an accuracy gate has tasks to judge, thresholds are
    finite."""
    r, f = loaded.recipe, str(loaded.path)
    problems: list[Problem] = []
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
    return problems


def served_problems(loaded: LoadedRecipe) -> list[Problem]:
    """``eval.engine: served`` scores the tasks on the benchmark stage's vllm serve: it needs a throughput
    section, and greedy tasks (sampling pairs no item with the offline backend; a standard lm-eval task's
    settings are only known at run time, where the served model refuses one that samples)."""
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
    """output_dir, held to ``output_folder_problems``."""
    return output_folder_problems(loaded.resolve(loaded.recipe.output_dir), str(loaded.path), "output_dir")


def output_folder_problems(out: Path, f: str, fld: str) -> list[Problem]:
    """Where run folders go (a recipe's output_dir, `suite run --out`, ``suite.run(output_dir=...)``) must be a folder
    this user can write in, or creatable as one, and not one ``guards.output_dir_refusal`` refuses (nothing is
    created here: a probe file is made and removed in the folder, or in its nearest existing parent)."""
    if (why := guards.output_dir_refusal(out, envs.REPO_ROOT)) is not None:
        return [Problem(f, fld, f"{out} {why}: run folders may not go there",
                        "point it at a folder of your own (e.g. ../runs beside the recipes)")]
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "is a file, not a folder" if existing == out else f"cannot be made: {existing} is a file"
        return [Problem(f, fld, f"{out} {what}", "point it at a folder (it is made if missing)")]
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".suite-write-check-"):
            pass
    except OSError as e:
        what = "is not writable" if existing == out else f"cannot be made: {existing} is not writable"
        return [Problem(f, fld, f"{out} {what} ({e.strerror or e})",
                        "point it at a folder you can write in (run folders, checkpoints and the "
                        "evaluation cache go there)")]
    return []


def serving_problems(loaded: LoadedRecipe) -> list[Problem]:
    """Variants the serve environment's vLLM build cannot serve (suite.runtime.envs.platform_problems), and
    engine arguments its ``EngineArgs`` does not take (name, type, choices), as Problems."""
    f = str(loaded.path)
    problems = [Problem(f, fld, msg, fix) for fld, msg, fix in envs.platform_problems(loaded.recipe)]
    r = loaded.recipe
    if r.eval.deterministic and (why := platform_problem(envs.vllm_platform())):
        problems.append(Problem(f, "eval.deterministic", *why))
    try:
        problems += kv.serving_problems(loaded, envs.engine_args_facts, envs.vllm_platform())
    except SuiteError as e:
        problems += [Problem(f, "kv_scales", f"cannot check the KV-cache options: {p.message}", p.fix)
                     for p in e.problems]
    sections = [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)] + [("eval", r.eval)]
    if any(v.engine_args for _, v in sections):
        try:
            facts = envs.engine_args_facts()
        except SuiteError as e:
            return problems + [Problem(f, "engine_args", f"cannot check engine arguments: {p.message}", p.fix)
                               for p in e.problems]
        for where, v in sections:
            problems += [Problem(f, f"{where}.engine_args.{key}", msg, fix)
                         for key, msg, fix in check_engine_args(v.engine_args, facts)[1]]
    return problems


def checkpoint_problems(loaded: LoadedRecipe, serving: bool = True) -> list[Problem]:
    """Variants served from an existing checkpoint (``model``): it exists, its config.json reads, and (``serving``)
    the serve environment's vLLM loads its quantization_config's quant_method."""
    r, f = loaded.recipe, str(loaded.path)
    sections = [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)]
    problems, methods = [], {}
    for where, v in sections:
        if v.model is None:
            continue
        path = checkpoint.model_path(loaded, v.model)
        try:
            q = checkpoint.quantization_of(checkpoint.read_config(path, v.model.revision))
        except (OSError, ValueError) as e:
            problems.append(Problem(f, f"{where}.model.id", f"no readable config.json for {path}: {e}",
                                    "give an existing checkpoint folder (relative to the recipe) or a Hugging Face "
                                    "id (with its revision) that this machine can read"))
            continue
        if q.get("quant_method"):
            methods[where] = q["quant_method"]
    if methods and serving:
        try:
            known = envs.vllm_quant_methods()
        except SuiteError as e:
            return problems + [Problem(f, "model", f"cannot ask vLLM which quantizations it loads: {p.message}", p.fix)
                               for p in e.problems]
        for where, method in methods.items():
            if known is not None and method not in known:
                problems.append(Problem(f, f"{where}.model.id", f"its config.json's quant_method {method!r} is not one "
                                        "the serve environment's vLLM loads", "serve it with a vLLM build that "
                                        f"supports it, or choose a checkpoint in one of: {', '.join(sorted(known)[:12])}..."))
    return problems


def include_path_tasks(loaded: LoadedRecipe) -> tuple[dict, list[Problem]]:
    """The task registry the recipe's tasks are looked up in: tasks/, with the tasks of every eval.include_path
    folder (read as lm-eval's TaskManager indexes a folder: every YAML's task or group name), and a Problem for
    each folder that is missing or holds no task."""
    r, f = loaded.recipe, str(loaded.path)
    ip = r.eval.include_path
    local, problems = dict(tasks.available()), []
    for i, folder in enumerate([ip] if isinstance(ip, str) else ip or []):
        fld = "eval.include_path" + ("" if isinstance(ip, str) else f"[{i}]")
        path = loaded.resolve(folder)
        if not path.is_dir():
            problems.append(Problem(f, fld, f"folder not found: {path}", "give a folder of lm-eval task YAMLs "
                                    "(relative to the recipe)"))
            continue
        found = tasks.available(path)
        if not found:
            problems.append(Problem(f, fld, f"{path}: no lm-eval task YAML in it (a YAML with 'task:' or 'group:')",
                                    "put your task YAMLs there, or remove the folder"))
        local = {**found, **local}  # tasks/ first: lm-eval's include_path order (the suite's own come first)
    return local, problems


def traffic_problems(loaded: LoadedRecipe, serving: bool = True) -> list[Problem]:
    """throughput.dataset: the file exists, parses, has a usable row, and every row's output length leaves room
    for a prompt in max_model_len; throughput.bench_args (``serving``): each read as the serve environment's
    ``vllm bench serve`` parser reads it (asked once, cached; suite.records.bench_argv.parser_problems)."""
    r, f, t = loaded.recipe, str(loaded.path), loaded.recipe.throughput
    if t is None:
        return []
    problems = []
    if t.dataset is not None:
        path = loaded.resolve(t.dataset.path)
        try:
            rows = dataset_rows(path, t.dataset.format)
        except (OSError, ValueError) as e:
            rows = None
            problems.append(Problem(f, "throughput.dataset.path", f"{path}: not a {t.dataset.format} file: "
                                    f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                                    "give the file's path (relative to the recipe) and its format (sharegpt | jsonl)"))
        if rows is not None and not rows:
            problems.append(Problem(f, "throughput.dataset.path", f"{path}: no usable row (ShareGPT: an entry with two "
                                    "conversation turns; jsonl: {prompt, output_len})", "fill the file"))
        too_long = [i for i, (_, out) in enumerate(rows or []) if out is not None and out >= r.model.max_model_len]
        if too_long:
            problems.append(Problem(f, "throughput.dataset.path", f"{path}: {len(too_long)} row(s) ask for an output "
                                    f"of max_model_len {r.model.max_model_len} tokens or more (e.g. row "
                                    f"{too_long[0] + 1}): vLLM refuses them", "shorten output_len there or raise "
                                    "model.max_model_len"))
    if t.bench_args and serving:
        try:
            options = envs.bench_serve_options()
        except SuiteError as e:
            return problems + [Problem(f, "throughput.bench_args", f"cannot ask vllm bench serve for its options: "
                                       f"{p.message}", p.fix) for p in e.problems]
        problems += [Problem(f, f"throughput.bench_args.{key}", what, fix)
                     for key, what, fix in bench_argv.parser_problems(t.bench_args, options)] if options is not None else []
    return problems
