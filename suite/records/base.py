"""The base of every typed config and result that crosses a process boundary (the ground floor of `suite`).

Only pydantic here: every stage environment (the quantize one too) can import it. Each stage reads
its config from a JSON file and writes its result to another; the parent reads the results back.

Every record file carries ``schema_version`` (``suite.records.migrate.SCHEMA_VERSION``) beside the record's own
fields; a file of an older version (none: version 0) is upgraded by ``suite.records.migrate`` as it is read. The
names of files a record holds (``suite.records.paths.FileName``) are written relative to ``root`` and resolved
against it on reading, when a root is given (the run folder, for everything in one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from suite.records import migrate
from suite.records.paths import ROOT

M = TypeVar("M", bound=BaseModel)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self, root: Path | None = None) -> str:
        """The record as its file holds it: ``schema_version`` first, file names relative to ``root``."""
        data = json.loads(self.model_dump_json(context={ROOT: root} if root is not None else None))
        return json.dumps({migrate.VERSION_FIELD: migrate.SCHEMA_VERSION, **data}, indent=2)

    def write(self, path: Path, root: Path | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.to_json(root))
        tmp.replace(path)
        return path

    @classmethod
    def from_json(cls: type[M], text: str | bytes, root: Path | None = None, recorded: str | None = None) -> M:
        """A record from its file's text, upgraded from an older schema version (``recorded``: the run folder an
        older record's absolute names were written under, made relative to ``root``), names resolved against
        ``root``."""
        data = json.loads(text)
        if isinstance(data, dict):
            data = migrate.upgrade(data, recorded)
        return cls.model_validate_json(json.dumps(data), context={ROOT: root} if root is not None else None)

    @classmethod
    def read(cls: type[M], path: Path, root: Path | None = None, recorded: str | None = None) -> M:
        return cls.from_json(Path(path).read_text(), root, recorded)
