"""The recipe schema's shared pieces: the strict base model, the error that carries its fix, name and secret patterns."""

from __future__ import annotations

from typing import Any, Union

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError


_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
Scalar = Union[bool, int, float, str]
# an engine argument: a scalar, a list (kv_cache_dtype_skip_layers: [0, 1]), a mapping (compilation_config),
# or null (vLLM's default); its name and type are checked against the serve environment's EngineArgs
EngineValue = Union[Scalar, None, list[Union[Scalar, dict[str, Any]]], dict[str, Any]]
SEED_MAX = 2**32 - 1  # numpy's seed range (lm-eval seeds numpy with it)


def bad(what: str, fix: str) -> PydanticCustomError:
    """A validation error that carries its fix (validation_problems prints it)."""
    return PydanticCustomError("suite", "{what}", {"what": what, "fix": fix})


class Strict(BaseModel):
    # strict: a YAML `true` is not the number 1, "4" is not 4, 1.5 is not an integer
    model_config = ConfigDict(extra="forbid", frozen=False, strict=True)
