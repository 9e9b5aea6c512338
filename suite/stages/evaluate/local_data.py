"""Loaders that lm-eval task YAMLs under tasks/ call (``custom_dataset: !function utils.load_csv_splits``).

The official MMLU and C-Eval releases are CSV files. ``datasets``' CSV builder goes through pandas,
which turns cells such as "2.50", "None" or "NA" into numbers or NaN and so changes the prompt text;
reading with Python's csv module keeps every cell exactly as released, as strings, the way the hub
copies hold them. Paths are relative to the working directory (the recipe's eval.data_dir).
"""

from __future__ import annotations

import csv
from pathlib import Path

from suite.runtime import safeio


def load_csv_splits(data_files: dict[str, str], column_names: list[str] | None = None, **_ignored):
    """{split: csv path} -> DatasetDict of string columns (a header row unless column_names is given)."""
    from datasets import Dataset, DatasetDict

    splits = {}
    for split, path in data_files.items():
        if not Path(path).is_file():
            raise FileNotFoundError(f"{Path(path).resolve()}: data file for split {split!r} not found "
                                    "(is eval.data_dir laid out like ../shared/data?)")
        with safeio.open_text(path, "dataset", newline="") as fh:
            rows = list(csv.reader(fh))
        header = column_names or rows[0]
        body = rows if column_names else rows[1:]
        splits[split] = Dataset.from_dict({c: [r[i] for r in body] for i, c in enumerate(header)})
    return DatasetDict(splits)
