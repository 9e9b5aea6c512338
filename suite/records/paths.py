"""Names of files in a run folder: written relative to the folder, resolved against wherever the folder is now.

A record that names a file (an evaluation's ``results_file`` and ``samples_files``) types the field ``FileName``.
Written with a root (``Record.write(path, root=...)``: the run folder, or a result store's entry), a name inside the
root is stored relative to it (POSIX separators); read with a root, a relative name is resolved against it, so the
folder can be copied elsewhere, with the output folder around it gone, and still names its own files. A relative
name that leaves its root (``..``) is refused; an absolute name outside the root (a record written before names were
relative, or a file the record does not own) is kept as it is. Without a root both ways leave a name as it is.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer, SerializationInfo, ValidationInfo

from suite.runtime import safeio

ROOT = "root"  # the validation/serialization context key holding the folder names are relative to


def run_folder_of(variant_dir: Path) -> Path:
    """The run folder of a variant's folder (``<run>/variants/<name>``): the root of its stage results' names."""
    return Path(variant_dir).parent.parent


def name_in(path: str, root: Path) -> str:
    """``path`` as the record stores it under ``root``: relative (POSIX) when inside it, else as it is."""
    p = Path(path)
    if not p.is_absolute():
        return PurePosixPath(*p.parts).as_posix()
    for base in (Path(root).absolute(), Path(root).resolve()):
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            continue
    return path


def resolve(name: str, root: Path) -> str:
    """The file a stored ``name`` means under ``root``: an absolute name as it is, a relative one joined to ``root``
    (ValueError when it leaves ``root``: a record names only its own folder's files)."""
    p = PurePosixPath(name)
    if Path(name).is_absolute():
        return name
    if ".." in p.parts:
        raise ValueError(f"{name!r} leaves the folder it is relative to ('..')")
    return str(Path(root).absolute() / Path(*p.parts)) if p.parts else name


def _root(info) -> Path | None:
    context = getattr(info, "context", None)
    return context.get(ROOT) if isinstance(context, dict) else None


def _resolved(value: str, info: ValidationInfo) -> str:
    root = _root(info)
    return resolve(value, root) if root is not None else value


def _stored(value: str, info: SerializationInfo) -> str:
    root = _root(info)
    return name_in(value, root) if root is not None else value


# a file a record names: relative to the root on disk, resolved against it in memory (see the module docstring)
FileName = Annotated[str, AfterValidator(_resolved), PlainSerializer(_stored, return_type=str)]


def resolved_names(data: dict, root: Path) -> dict:
    """A record's raw data (as json.loads gives it, upgraded) with its file names (``results_file``,
    ``samples_files``, ``tokenizer_file``) resolved against ``root``, for a reader that checks the data before typing it; a name that
    leaves ``root`` is kept as written (the typed read refuses it)."""

    def one(name):
        try:
            return resolve(name, root) if isinstance(name, str) else name
        except ValueError:
            return name

    out = dict(data)
    if "results_file" in out:
        out["results_file"] = one(out["results_file"])
    if isinstance(out.get("samples_files"), dict):
        out["samples_files"] = {k: one(v) for k, v in out["samples_files"].items()}
    if "tokenizer_file" in out:
        out["tokenizer_file"] = one(out["tokenizer_file"])
    return out


def recorded_run_dir(run_dir: Path) -> str | None:
    """Where the run folder was when its files were written (plan.json's ``run_dir``, else summary.json's): what a
    version-0 record's absolute names are relative to (suite.records.migrate). None: neither says."""
    for name in ("plan.json", "summary.json"):
        try:
            data = safeio.read_json(Path(run_dir) / name, "record")  # a FIFO or a huge file is not read
        except (OSError, ValueError, RecursionError, safeio.UnsafeRead):
            continue
        if isinstance(data, dict) and isinstance(data.get("run_dir"), str):
            return data["run_dir"]
    return None
