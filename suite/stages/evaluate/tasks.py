"""The task registry: lm-eval task YAMLs under tasks/ (tasks are data, not code, as in lm-eval).

The CLI validates recipes against this registry without importing lm-eval: it reads the YAML files
itself (tolerating lm-eval's ``!function`` tags) and records each task's or group's name, its
headline metric and whether it runs model-written code.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from suite.runtime import safeio
from suite._data import folder as data_folder

TASKS_DIR = data_folder("tasks")  # package data in a wheel, the top-level tasks/ in a checkout

# Headline ("primary") metric per task family, as lm-eval reports it ("metric,filter").
# Local tasks declare theirs in `metadata.suite_primary_metric`; standard lm-eval names use this table.
STANDARD_PRIMARY_METRIC = {
    "mmlu": "acc,none",
    "gsm8k": "exact_match,strict-match",
    "humaneval": "pass@1,create_test",
    "ceval-valid": "acc,none",
}
STANDARD_CODE_TASKS = {"humaneval", "humaneval_instruct", "mbpp"}
MAX_INCLUDES = 16  # files in one include: chain


@dataclass(frozen=True)
class TaskInfo:
    name: str
    path: Path
    kind: str  # "task" or "group"
    primary_metric: str | None
    higher_is_better: bool
    unsafe_code: bool
    subtasks: tuple[str, ...] = ()
    data_files: tuple[str, ...] = ()  # a task's dataset_kwargs.data_files, relative to eval.data_dir
    samples: bool = False  # its generations are sampled, not greedy (_samples)


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _read(path: Path) -> dict:
    try:
        data = safeio.read_yaml(path, "task", loader=_Loader)  # size and nesting bounded
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _merged(path: Path, depth: int = 0) -> dict:
    """The YAML with its `include:` chain applied (include first, the file's keys on top); a chain longer than
    MAX_INCLUDES (a loop) is refused."""
    data = _read(path)
    inc = data.get("include")
    if inc and depth >= MAX_INCLUDES:
        raise safeio.UnsafeRead(path, f"include: chain longer than {MAX_INCLUDES} files (a loop?)", "end the chain")
    if inc:
        base = _merged(path.parent / inc, depth + 1)
        base.update(data)
        return base
    return data


@lru_cache(maxsize=4)
def available(tasks_dir: Path = TASKS_DIR) -> dict[str, TaskInfo]:
    out: dict[str, TaskInfo] = {}
    for path in safeio.walk_files(tasks_dir, "*.yaml"):  # bounded: / or /proc is refused, not walked
        if "data" in path.relative_to(tasks_dir).parts:
            continue
        d = _merged(path)
        meta = d.get("metadata") or {}
        if "group" in d and "task" in d and isinstance(d["task"], list):
            subtasks = tuple(t if isinstance(t, str) else t.get("task", "") for t in d["task"])
            out[d["group"]] = TaskInfo(d["group"], path, "group", meta.get("suite_primary_metric"), True,
                                       bool(meta.get("suite_unsafe_code")), subtasks)
        elif isinstance(d.get("task"), str):
            hib = all(m.get("higher_is_better", True) for m in d.get("metric_list") or [] if isinstance(m, dict))
            files = (d.get("dataset_kwargs") or {}).get("data_files") or {}
            out[d["task"]] = TaskInfo(d["task"], path, "task", meta.get("suite_primary_metric"), hib,
                                      bool(d.get("unsafe_code")),
                                      data_files=tuple(sorted(set(files.values() if isinstance(files, dict) else files))),
                                      samples=_samples(d))
    return out


def _samples(task: dict) -> bool:
    """lm-eval 0.4.13 with its vLLM backend: no generation_kwargs is greedy (``default_gen_kwargs``);
    do_sample false is greedy whatever the temperature (``normalize_gen_kwargs``); else a temperature > 0
    samples, and so does none at all (``SamplingParams``' default temperature is 1.0)."""
    gen = task.get("generation_kwargs")
    if task.get("output_type") != "generate_until" or not isinstance(gen, dict) or gen.get("do_sample") is False:
        return False
    try:
        return gen.get("temperature") is None or float(gen["temperature"]) > 0.0
    except (TypeError, ValueError):
        return True


def samples(task: str) -> bool:
    """Whether a local task (or a subtask of a local group) samples its generations (not greedy: ``_samples``).
    False for a name not under tasks/ (not known here)."""
    info = available().get(task)
    if info is None:
        return False
    return info.samples or any(samples(s) for s in info.subtasks)


def data_files(task: str) -> list[str]:
    """The data files a local task (or every subtask of a local group) reads, relative to eval.data_dir."""
    info = available().get(task)
    if info is None:
        return []
    if info.kind == "group":
        return [f for sub in info.subtasks for f in data_files(sub)]
    return list(info.data_files)


def primary_metric(task: str, override: str | None = None) -> str | None:
    if override:
        return override
    info = available().get(task)
    if info and info.primary_metric:
        return info.primary_metric
    return STANDARD_PRIMARY_METRIC.get(task)


def needs_code_execution(task: str) -> bool:
    info = available().get(task)
    if info:
        return info.unsafe_code or any(needs_code_execution(s) for s in info.subtasks)
    return task in STANDARD_CODE_TASKS


def suggest(name: str, choices) -> str | None:
    near = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return near[0] if near else None
