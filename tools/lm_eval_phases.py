"""lm-eval's own host cost on a machine, without a model: the evaluate stage's phases with an LM that answers at once.

    .venv/bin/python tools/lm_eval_phases.py DATA_DIR [TASK ...] [--profile stacks.json]

An H200 evaluation of the four benchmarks spent ~130-145 s that no progress bar explains, against ~12 s for the same
lm-eval phases on the 2-core CPU machine (docs/results/h200-eval1-20261204/). This measures those phases on any
host in seconds, without starting an engine: it runs the evaluate stage's own ``prepare`` and ``score_tasks`` (the
suite's task folder, templates compiled once, the code sandbox in ``process`` mode, the stage's timers) with an LM whose
loglikelihoods are all -1 and whose generations are empty, and prints the stage's ``time_split_s`` keys as JSON
(plus ``import``, the time to import lm-eval and set it up). HumanEval's 164 programs still run (empty completions fail fast).
The scores are meaningless; the seconds are the point. ``--profile`` also writes the main thread's stack profile
(``python -m suite.runtime.stacks FILE``).

On the CPU machine (2026-12-05, suite_mmlu suite_gsm8k suite_humaneval suite_ceval, ../shared/data): ~11-12 s,
of it tasks 1.0-1.3, build 3.5, scoring 4.6-5.2, env_info 0.5-0.8, other 1.0-1.4.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["suite_mmlu", "suite_gsm8k", "suite_humaneval", "suite_ceval"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path, help="the recipes' eval.data_dir (laid out like ../shared/data)")
    ap.add_argument("tasks", nargs="*", default=TASKS, help=f"tasks under tasks/ (default: {' '.join(TASKS)})")
    ap.add_argument("--profile", type=Path, help="write the main thread's stack profile here")
    args = ap.parse_args(argv)
    if not args.data_dir.is_dir():
        print(f"error: {args.data_dir}: no such folder (the data folder the recipes' eval.data_dir names)",
              file=sys.stderr)
        return 2
    profile = args.profile.resolve() if args.profile else None  # before the chdir below
    sys.path.insert(0, str(ROOT))
    from suite.runtime import stacks

    sampler = stacks.StackSampler().start() if profile else None
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    from suite.stages.evaluate import stage
    from suite.stages.evaluate.timing import instant_lm
    from suite.records.evaluate import EngineConfig, EvaluateConfig, TaskRun

    config = EvaluateConfig(engine=EngineConfig(model="instant"), tasks=[TaskRun(name=t) for t in args.tasks],
                            data_dir=str(args.data_dir.resolve()), include_path=str(ROOT / "tasks"),
                            allow_code_execution=True, code_sandbox="process", output_dir=".")
    task_manager = stage.prepare(config)  # the stage's own setup and scoring: only the engine is left out
    imported = time.perf_counter() - t0
    t1 = time.perf_counter()
    _, _, split, _ = stage.score_tasks(config, instant_lm(), task_manager)  # the last: eval.sequential's looks
    total = time.perf_counter() - t1
    print(json.dumps({"import": round(imported, 2), **{k: round(v, 2) for k, v in split.items()},
                      "total": round(total, 2)}))
    if sampler is not None:
        sampler.stop()
        sampler.write(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
