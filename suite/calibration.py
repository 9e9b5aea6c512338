"""Calibration sets: named, small YAML files under calibration/ (a registry, like lm-eval's tasks).

A set says where rows come from (a local JSONL file, or a Hugging Face dataset on a connected machine)
and how a row becomes text (``chat``: the model's chat template over a ``messages`` list; ``text``:
one column as it is; ``qa``: question + answer columns). ``load_texts`` streams rows and stops at
the number needed; ``content_hash`` keys checkpoints on the set's contents.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Iterator, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "calibration"


class CalibrationSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    path: str | None = Field(None, description="local JSONL file, relative to this YAML")
    hf_dataset: str | None = Field(None, description="Hugging Face dataset id (connected machines)")
    hf_split: str = "train"
    format: Literal["chat", "text", "qa"] = "chat"
    messages_column: str = "messages"
    text_column: str = "text"
    question_column: str = "question"
    answer_column: str = "answer"
    shuffle_seed: int = 42

    @model_validator(mode="after")
    def _one_source(self) -> "CalibrationSet":
        if bool(self.path) == bool(self.hf_dataset):
            raise ValueError("give exactly one of 'path' (local JSONL) or 'hf_dataset'")
        return self


def available(directory: Path = CALIBRATION_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def load_set(name: str, directory: Path = CALIBRATION_DIR) -> tuple[CalibrationSet, Path]:
    path = available(directory)[name]
    spec = CalibrationSet.model_validate(yaml.safe_load(path.read_text()))
    return spec, path


def _rows(spec: CalibrationSet, yaml_path: Path) -> Iterator[dict]:
    if spec.path:
        with open(yaml_path.parent / spec.path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)
    else:  # streamed: a large hub set is never materialised
        from datasets import load_dataset

        yield from load_dataset(spec.hf_dataset, split=spec.hf_split, streaming=True)


def _missing(spec: CalibrationSet, row: dict) -> list[str]:
    need = {"chat": [spec.messages_column], "text": [spec.text_column],
            "qa": [spec.question_column, spec.answer_column]}[spec.format]
    return [c for c in need if c not in row]


def row_to_text(spec: CalibrationSet, row: dict, tokenizer) -> str:
    if spec.format == "chat":
        return tokenizer.apply_chat_template(row[spec.messages_column], tokenize=False)
    if spec.format == "text":
        return row[spec.text_column]
    return f"Question: {row[spec.question_column]}\nAnswer: {row[spec.answer_column]}"


def load_texts(name: str, num_samples: int, tokenizer, directory: Path = CALIBRATION_DIR) -> list[str]:
    """The first ``num_samples`` rows after a seeded shuffle of a bounded buffer, as text."""
    spec, path = load_set(name, directory)
    rng = random.Random(spec.shuffle_seed)
    buffer: list[dict] = []
    for i, row in enumerate(_rows(spec, path)):
        missing = _missing(spec, row)
        if missing:
            raise ValueError(f"{path}: row {i} has no column(s) {missing} needed by format {spec.format!r}")
        buffer.append(row)
        if len(buffer) >= 4 * num_samples:
            break
    rng.shuffle(buffer)
    return [row_to_text(spec, r, tokenizer) for r in buffer[:num_samples]]


def content_hash(name: str, directory: Path = CALIBRATION_DIR) -> str:
    """Hash of the set's YAML and, for a local set, its data file."""
    spec, path = load_set(name, directory)
    h = hashlib.sha256(path.read_bytes())
    if spec.path:
        h.update((path.parent / spec.path).read_bytes())
    return h.hexdigest()
