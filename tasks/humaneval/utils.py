"""HumanEval metric for tasks/humaneval: pass@k through suite.stages.evaluate.sandbox (no hub metric download)."""

from suite.stages.evaluate.sandbox.metric import build_predictions, pass_at_k  # noqa: F401  (referenced by the YAML)
