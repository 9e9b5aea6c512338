"""Loader for the CSV release files (see suite.local_data: keeps every cell as released)."""

from suite.local_data import load_csv_splits  # noqa: F401  (referenced by the YAMLs)
