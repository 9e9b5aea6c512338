"""The run's live MLflow hook (suite.outputs.mlflow_live), with what only this side may read: the tasks' data files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from suite.runtime import safeio
from suite.outputs.mlflow_live import LiveTracking
from suite.stages.evaluate import tasks


def task_datasets(loaded) -> list[tuple[str, str, str]]:
    """(task, data folder, sha256 of its data files, 32 hex digits) for each recipe task that reads local files."""
    data_dir = Path(loaded.resolve(loaded.recipe.eval.data_dir))
    out = []
    for t in loaded.recipe.eval.tasks:
        files = sorted(set(tasks.data_files(t.name)))
        if not files:
            continue
        h = hashlib.sha256()
        for f in files:
            p = data_dir / f
            h.update(f.encode() + b"\0" + (safeio.read_bytes(p, "dataset") if p.is_file() else b"<missing>"))
        out.append((t.name, str(data_dir), h.hexdigest()[:32]))
    return out


def live(summary, loaded, run_dir: Path, out_root: Path, on: bool) -> LiveTracking:
    """The run's MLflow runs, RUNNING from now (a tracker that does nothing when ``on`` is false)."""
    return LiveTracking(summary, loaded, run_dir, out_root, on=on, datasets=task_datasets(loaded) if on else [])
