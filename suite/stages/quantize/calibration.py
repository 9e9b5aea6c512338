"""Calibration sets: named, small YAML files under calibration/ (a registry, like lm-eval's tasks).

A set says where rows come from (local JSONL, gzipped JSONL or CSV files — ``path`` may be a glob —
or a Hugging Face dataset on a connected machine) and how a row becomes text (``chat``: the model's
chat template over a ``messages`` list; ``text``: one column as it is; ``qa``: question + answer
columns; ``template``: a format string over the row's columns, e.g. code prompt + solution, or an exam
question with its choices, answer and explanation). ``load_texts`` streams rows and stops at the number
needed; ``content_hash`` keys checkpoints on the set's contents.

A recipe names a set from the registry (``calibration: gsm8k``), a set YAML of its own (``calibration:
my-data.yaml``, relative to the recipe: a user's file, offline), or a weighted mix
(``calibration: [{set: chat-demo, weight: 3}, {set: gsm8k, weight: 1}]``).
"""

from __future__ import annotations

import csv
import hashlib
import random
from pathlib import Path
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from suite.runtime import safeio
from suite._data import folder as data_folder

CALIBRATION_DIR = data_folder("calibration")  # package data in a wheel, the top-level calibration/ in a checkout


class CalibrationSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    path: str | None = Field(None, description="local JSONL file, relative to this YAML")
    hf_dataset: str | None = Field(None, description="Hugging Face dataset id (connected machines)")
    hf_split: str = "train"
    format: Literal["chat", "text", "qa", "template"] = "chat"
    template: str | None = Field(None, description="format 'template': Python format string over the row's columns")
    messages_column: str = "messages"
    text_column: str = "text"
    question_column: str = "question"
    answer_column: str = "answer"
    shuffle_seed: int = 42

    @model_validator(mode="after")
    def _one_source(self) -> "CalibrationSet":
        if bool(self.path) == bool(self.hf_dataset):
            raise ValueError("give exactly one of 'path' (local JSONL/CSV files) or 'hf_dataset'")
        if self.format == "template" and not self.template:
            raise ValueError("format 'template' needs 'template'")
        return self


def is_file_ref(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml"))


def resolve(ref: str, directory: Path = CALIBRATION_DIR) -> tuple[CalibrationSet, Path]:
    """A registry name, or the path of a set YAML (absolute, or relative to the working directory)."""
    path = Path(ref) if is_file_ref(ref) else available(directory)[ref]
    return CalibrationSet.model_validate(safeio.read_yaml(path, "calibration")), path


def data_files(spec: CalibrationSet, yaml_path: Path) -> list[Path]:
    """The local files of a set (its ``path``, a glob allowed), sorted."""
    if not spec.path:
        return []
    if any(c in spec.path for c in "*?["):
        return sorted(yaml_path.parent.glob(spec.path))
    return [yaml_path.parent / spec.path]


def mix_parts(calibration) -> list[tuple[str, float]]:
    """A recipe's calibration (a set reference, or [{set, weight}, ...]) as (reference, weight) pairs."""
    if isinstance(calibration, str):
        return [(calibration, 1.0)]
    return [(m["set"] if isinstance(m, dict) else m.set, float(m["weight"] if isinstance(m, dict) else m.weight))
            for m in calibration]


def load_mix(calibration, num_samples: int, tokenizer, directory: Path = CALIBRATION_DIR) -> list[str]:
    """``num_samples`` texts split over the mix by weight (largest remainder), shuffled together."""
    parts = mix_parts(calibration)
    total = sum(w for _, w in parts)
    exact = [num_samples * w / total for _, w in parts]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(parts)), key=lambda i: exact[i] - counts[i], reverse=True)[:num_samples - sum(counts)]:
        counts[i] += 1
    texts = [t for (ref, _), n in zip(parts, counts) if n for t in load_texts(ref, n, tokenizer, directory)]
    if len(parts) > 1:
        random.Random(0).shuffle(texts)
    return texts


def available(directory: Path = CALIBRATION_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.yaml"))}


def load_set(name: str, directory: Path = CALIBRATION_DIR) -> tuple[CalibrationSet, Path]:
    return resolve(name, directory)


def _rows(spec: CalibrationSet, yaml_path: Path) -> Iterator[dict]:
    if spec.path:
        for f in data_files(spec, yaml_path):
            if f.suffix == ".csv":
                with safeio.open_text(f, "dataset", newline="") as fh:
                    yield from csv.DictReader(fh)
                continue
            yield from safeio.iter_jsonl(f, "dataset")  # a .gz decompressed, within the same cap
    else:  # streamed: a large hub set is never materialised
        from datasets import load_dataset

        yield from load_dataset(spec.hf_dataset, split=spec.hf_split, streaming=True)


def _missing(spec: CalibrationSet, row: dict) -> list[str]:
    if spec.format == "template":
        import string

        need = [f for _, f, _, _ in string.Formatter().parse(spec.template or "") if f]
    else:
        need = {"chat": [spec.messages_column], "text": [spec.text_column],
                "qa": [spec.question_column, spec.answer_column]}[spec.format]
    return [c for c in need if c not in row]


def row_to_text(spec: CalibrationSet, row: dict, tokenizer) -> str:
    if spec.format == "chat":
        return tokenizer.apply_chat_template(row[spec.messages_column], tokenize=False)
    if spec.format == "text":
        return row[spec.text_column]
    if spec.format == "template":
        return spec.template.format_map(row)
    return f"Question: {row[spec.question_column]}\nAnswer: {row[spec.answer_column]}"


def load_texts(name: str, num_samples: int, tokenizer, directory: Path = CALIBRATION_DIR) -> list[str]:
    """The first ``num_samples`` rows after a seeded shuffle of a bounded buffer, as text."""
    spec, path = resolve(name, directory)
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


def content_hash(calibration, directory: Path = CALIBRATION_DIR) -> str:
    """Hash of each set's YAML and local data files, with the mix weights."""
    h = hashlib.sha256()
    for ref, weight in mix_parts(calibration):
        spec, path = resolve(ref, directory)
        h.update(f"{weight}:".encode() + safeio.read_bytes(path, "calibration"))
        for f in data_files(spec, path):
            h.update(f.name.encode() + safeio.read_bytes(f, "dataset"))
    return h.hexdigest()
