"""Loader for the CSV release files (see suite.stages.evaluate.local_data: keeps every cell as released)."""

from suite.stages.evaluate.local_data import load_csv_splits  # noqa: F401  (referenced by the YAMLs)
