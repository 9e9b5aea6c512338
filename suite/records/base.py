"""The base of every typed config and result that crosses a process boundary (the ground floor of `suite`).

Only pydantic here: every stage environment (the quantize one too) can import it. Each stage reads
its config from a JSON file and writes its result to another; the parent reads the results back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

M = TypeVar("M", bound=BaseModel)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(path)
        return path

    @classmethod
    def read(cls: type[M], path: Path) -> M:
        return cls.model_validate_json(Path(path).read_text())


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
