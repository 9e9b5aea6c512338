"""The evaluate stage's config and result (pydantic only)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from suite.stages.records import EngineConfig, Record


class TaskRun(Record):
    name: str
    metric: Optional[str] = None
    num_fewshot: Optional[int] = None
    limit: Optional[float] = None


class EvaluateConfig(Record):
    engine: EngineConfig
    tasks: list[TaskRun]
    batch_size: Any = "auto"
    data_dir: str
    include_path: str
    apply_chat_template: bool = False
    allow_code_execution: bool = False
    code_sandbox: str = "namespaces"
    max_gen_toks: Optional[int] = None
    seed: int = 1234
    output_dir: str


class TaskScore(Record):
    task: str
    metric: str
    value: float
    stderr: Optional[float] = None
    n: Optional[int] = None
    all_metrics: dict[str, float] = Field(default_factory=dict, description="every 'metric,filter' lm-eval gave")


class EvaluateResult(Record):
    scores: list[TaskScore]
    cache_hit: bool = False
    cache_key: Optional[str] = None
    results_file: str
    samples_files: dict[str, str] = Field(default_factory=dict)
    wall_s: float
    engine_load_s: float
    versions: dict[str, str] = Field(default_factory=dict)
    config_hash: dict[str, Any] = Field(default_factory=dict, description="lm-eval task hashes / chat template")
    code_sandbox: Optional[str] = Field(None, description="the suite.stages.evaluate.sandbox mode model-written code ran under "
                                        "(None: no code ran)")
