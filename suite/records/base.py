"""The base of every typed config and result that crosses a process boundary (the ground floor of `suite`).

Only pydantic and the safe reader (suite.runtime.safeio: the standard library and PyYAML) here: every stage
environment (the quantize one too) can import it. Each stage reads its config from a JSON file and
writes its result to another; the parent reads the results back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from suite.runtime import safeio

M = TypeVar("M", bound=BaseModel)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        try:
            tmp.write_text(self.model_dump_json(indent=2))
        except OSError as e:  # a full disk fails the write, whose error names no file: name it
            raise OSError(e.errno, e.strerror, str(tmp)) if e.filename is None else e
        tmp.replace(path)
        return path

    @classmethod
    def read(cls: type[M], path: Path) -> M:
        """The record in ``path``, read by the safe reader (a regular file within the record cap, nested at most
        its depth cap: a refusal is a SuiteError naming the file)."""
        text = safeio.read_text(path, "record")
        safeio.check_json_depth(text, path, "record")
        return cls.model_validate_json(text)


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
