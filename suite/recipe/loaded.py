"""A validated recipe and where it came from (LoadedRecipe). Its own module so that load and checks (which
load calls) both import it one way (no circle)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from suite.recipe.checkpoint import is_local_model
from suite.recipe.schema import Recipe


class LoadedRecipe(BaseModel):
    """A validated recipe and where it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    recipe: Recipe
    path: Path
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.path.parent / p).resolve()

    def model_is_local(self) -> bool:
        """A folder: a path by its form (./, /, ~, or not org/name), or an org/name that is a folder beside the
        recipe (``models/my-finetune``: as transformers would, the folder wins over a hub id of that name; before,
        it was keyed as a hub id, by its name alone, and a rewritten fine-tune kept its checkpoints)."""
        m = self.recipe.model.id
        return is_local_model(m) or self.resolve(m).is_dir()

    def model_path(self) -> str:
        """Local folder (absolute) for a local model; the hub id unchanged otherwise."""
        m = self.recipe.model.id
        return str(self.resolve(m)) if self.model_is_local() else m


def fields_that_differ(a, b, where: str = "") -> list[str]:
    """The dotted fields in which two parsed recipes (plain YAML/JSON data) differ (a resume's recipe against the
    recorded one; a run's summary copy against the trusted recipe the gate reads)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [f for k in sorted(set(a) | set(b), key=str)
                for f in fields_that_differ(a.get(k), b.get(k), f"{where}.{k}" if where else str(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [f for i, (x, y) in enumerate(zip(a, b)) for f in fields_that_differ(x, y, f"{where}[{i}]")]
    return [] if a == b else [where or "(the whole recipe)"]
