"""HumanEval metric for tasks/humaneval: pass@k through suite.sandbox (no hub metric download)."""

from suite.sandbox import build_predictions, pass_at_k  # noqa: F401  (referenced by the YAML)
