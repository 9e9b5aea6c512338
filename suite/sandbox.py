"""Kept for tasks/humaneval/utils.py (an lm-eval ``!function`` file): the sandbox is suite.stages.evaluate.sandbox."""

from suite.stages.evaluate.sandbox import build_predictions, pass_at_k  # noqa: F401
