#!/usr/bin/env python3
"""Pack a run folder for travel to the next machine (`suite run --resume` there): a gzipped tar on stdout.

usage: pack_run.py OUT RUN > run.tar.gz      (tools/h200/h200-wait.sh: OUT /tmp/runs-NAME, RUN its run folder's name)

The tar holds OUT/RUN and the run's MLflow store beside it (mlflow.db, mlartifacts, mlruns), as
`tar czf - -C OUT RUN mlflow.db ...` would, with one difference: each lm-eval ``samples_*.jsonl`` loses its
``arguments`` field, the prompt texts lm-eval sent the model. Everything the suite reads from a sample stays
(task, doc_id, doc, target, resps, filtered_resps, the metrics, lm-eval's doc/prompt/target hashes), so the
summary's paired statistics, the perplexity gate and `suite score-code` read the packed files as they read the
originals. Why: 5-shot MMLU repeats a ~700-token context in each of its 4 requests; its samples file is ~170 MB
per variant, which neither fits the device tool's 8 files of 15 MiB coming back nor the 64 MiB going out again.
lm-eval rebuilds the prompts from doc + the task config (its prompt_hash still says which they were).

A line that does not parse (a samples file still being written) is kept as it is; a file that grows while it is
read (a log) is packed as far as it was when the pack reached it.
"""
from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

MLFLOW = ("mlflow.db", "mlartifacts", "mlruns")


def slim_line(line: bytes) -> bytes:
    try:
        row = json.loads(line)
    except ValueError:
        return line
    if not isinstance(row, dict) or "arguments" not in row:
        return line
    row.pop("arguments")
    return json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n"


def slim_samples(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return b"".join(slim_line(line) for line in fh)


def add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    if path.is_symlink() or not path.is_file():
        tar.add(path, arcname, recursive=False)
        return
    info = tar.gettarinfo(path, arcname)
    if path.name.startswith("samples_") and path.suffix == ".jsonl":
        data = slim_samples(path)
    else:
        with open(path, "rb") as fh:
            data = fh.read(info.size)  # a growing log: as far as it was
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def pack(out: Path, run: str, dest) -> list[str]:
    """Write the gzipped tar of OUT/RUN (+ the MLflow store) to the binary stream ``dest``; the names packed."""
    roots = [run] + [m for m in MLFLOW if (out / m).exists()]
    names = []
    with tarfile.open(fileobj=dest, mode="w|gz") as tar:
        for root in roots:
            top = out / root
            for path in [top, *sorted(top.rglob("*"))] if top.is_dir() else [top]:
                arc = str(path.relative_to(out))
                try:
                    add(tar, path, arc)
                except FileNotFoundError:  # a temporary file of a job still running, renamed or removed meanwhile
                    continue
                names.append(arc)
    return names


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or not (Path(argv[0]) / argv[1]).is_dir():
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    pack(Path(argv[0]), argv[1], sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
