"""The base of every typed config and result that crosses a process boundary (the ground floor of `suite`).

Only pydantic here: every stage environment (the quantize one too) can import it. Each stage reads
its config from a JSON file and writes its result to another; the parent reads the results back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

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
