"""Where a run is logged in MLflow: the tracking URI and experiment, with one precedence, and where each came from.

URI: ``suite sync --uri``, then the recipe's ``tracking.uri``, then MLflow's own ``MLFLOW_TRACKING_URI``, then the
local default (a SQLite file ``mlflow.db`` in the run root, artifacts beside it). Experiment: the recipe's
``tracking.experiment``, then ``MLFLOW_EXPERIMENT_NAME``, then the recipe's name. MLflow's credentials
(``MLFLOW_TRACKING_USERNAME`` / ``_PASSWORD`` / ``_TOKEN``, ``~/.mlflow/credentials``) are left to MLflow, which reads
them itself; a URI carrying a credential (a user part, a secret in its query, fragment or path) is refused from every
source (it would be written to summary.json and printed), and the refusal never repeats it. No mlflow import here: ``suite plan`` and ``suite validate`` show the target cheaply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from suite.runtime.errors import Problem, SuiteError
from suite.runtime.secrets import redact, uri_credential

ENV_URI = "MLFLOW_TRACKING_URI"
ENV_EXPERIMENT = "MLFLOW_EXPERIMENT_NAME"


@dataclass(frozen=True)
class Target:
    uri: str
    experiment: str
    uri_from: str  # "--uri", "recipe", "MLFLOW_TRACKING_URI" or "default"
    experiment_from: str  # "recipe", "MLFLOW_EXPERIMENT_NAME" or "recipe name"

    def describe(self) -> str:
        return redact(f"tracking: {self.uri} (from {self.uri_from}), experiment {self.experiment!r} "
                      f"(from {self.experiment_from})")


def default_uri(out_root: Path) -> str:
    return f"sqlite:///{(out_root / 'mlflow.db').resolve()}"


def target(recipe, out_root: Path, uri: str | None = None) -> Target:
    """The MLflow target of a run of ``recipe`` (a ``Recipe``) whose run root is ``out_root``."""
    env_uri, env_exp = os.environ.get(ENV_URI, "").strip(), os.environ.get(ENV_EXPERIMENT, "").strip()
    check_uris(uri, recipe.tracking.uri)
    found = next((u, w) for u, w in ((uri, "--uri"), (recipe.tracking.uri, "recipe"), (env_uri, ENV_URI),
                                     (default_uri(out_root), "default")) if u)
    exp = next((e, w) for e, w in ((recipe.tracking.experiment, "recipe"), (env_exp, ENV_EXPERIMENT),
                                   (recipe.name, "recipe name")) if e)
    return Target(found[0], exp[0], found[1], exp[1])


def check_uris(uri: str | None = None, recipe_uri: str | None = None) -> None:
    """Refuse a tracking URI that holds a credential, from ``suite sync --uri``, the recipe or MLflow's environment
    (``MLFLOW_TRACKING_URI``), naming where it came from and never the URI."""
    for value, source in ((uri, "--uri"), (recipe_uri, "tracking.uri"), (os.environ.get(ENV_URI, "").strip(), ENV_URI)):
        if value and (what := uri_credential(value)):
            raise SuiteError(Problem(source, "", f"the tracking URI holds {what}; it would be written to summary.json "
                                     "and logs", "remove it from the URI and set MLFLOW_TRACKING_USERNAME / "
                                     "MLFLOW_TRACKING_PASSWORD / MLFLOW_TRACKING_TOKEN (or ~/.mlflow/credentials) "
                                     "instead"))
