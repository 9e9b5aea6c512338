"""The base of every typed config and result that crosses a process boundary, and the engine config two stages share.

Only pydantic here: every stage environment (the quantize one too) can import it. Each stage reads
its config from a JSON file and writes its result to another; the parent reads the results back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

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


class EngineConfig(Record):
    """How vLLM loads one variant (shared by evaluate and benchmark)."""

    model: str
    dtype: str = "auto"
    max_model_len: int = 4096
    kv_cache_dtype: str = "auto"
    engine_args: dict[str, Any] = Field(default_factory=dict)
