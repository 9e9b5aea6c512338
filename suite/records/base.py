"""The base of every typed config and result that crosses a process boundary (the ground floor of `suite`).

Only pydantic and the safe reader (suite.runtime.safeio: the standard library and PyYAML) here: every stage
environment (the quantize one too) can import it. Each stage reads its config from a JSON file and
writes its result to another; the parent reads the results back.

Every record file carries ``schema_version`` (``suite.records.migrate.SCHEMA_VERSION``) beside the record's own
fields; a file of an older version (none: version 0) is upgraded by ``suite.records.migrate`` as it is read. The
names of files a record holds (``suite.records.paths.FileName``) are written relative to ``root`` and resolved
against it on reading, when a root is given (the run folder, for everything in one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from suite.runtime import atomic, safeio

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
        return atomic.write(path, self.to_json(root))  # a full disk's OSError names the file

    @classmethod
    def from_json(cls: type[M], text: str | bytes, root: Path | None = None, recorded: str | None = None,
                  source="record text") -> M:
        """A record from its file's text, its nesting bounded (the safe reader's record cap), upgraded from an older
        schema version (``recorded``: the run folder an older record's absolute names were written under, made
        relative to ``root``), names resolved against ``root``."""
        data = safeio.loads_json(text, source, "record")
        if isinstance(data, dict):
            data = migrate.upgrade(data, recorded)
        return cls.model_validate_json(json.dumps(data), context={ROOT: root} if root is not None else None)

    @classmethod
    def read(cls: type[M], path: Path, root: Path | None = None, recorded: str | None = None) -> M:
        """The record in ``path``, read by the safe reader (a regular file within the record cap, nested at most
        its depth cap: a refusal is a SuiteError naming the file)."""
        return cls.from_json(safeio.read_text(path, "record"), root, recorded, source=path)


# the environment variable through which the parent names a stage process's job (JSON: {"variant": ..., "key": ...})
JOB_ENV = "SUITE_JOB"


class JobStamp(Record):
    """Which job of the run's plan made a stage result, written into the result by the stage process itself (so a
    result is never on disk without it): the variant and stage, the job's content key (suite.plan.keys) and the
    sha256 of the config file the stage read. The gate judges a result only when this binds it to its planned job
    (suite.analysis.gates.binding); a resume keeps only a result that records its key."""

    variant: str
    stage: str
    key: Optional[str] = Field(None, description="the job's content key; None only for a job that has none")
    config_sha256: str = Field(description="sha256 of the bytes of <stage>.config.json as the stage read them")
