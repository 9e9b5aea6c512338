"""Where a run is logged in MLflow: the tracking URI and experiment, with one precedence, and where each came from.

URI: ``suite sync --uri``, then the recipe's ``tracking.uri``, then MLflow's own ``MLFLOW_TRACKING_URI``, then the
local default (a SQLite file ``mlflow.db`` in the run root, artifacts beside it). Experiment: the recipe's
``tracking.experiment``, then ``MLFLOW_EXPERIMENT_NAME``, then the recipe's name. MLflow's credentials
(``MLFLOW_TRACKING_USERNAME`` / ``_PASSWORD`` / ``_TOKEN``, ``~/.mlflow/credentials``) are left to MLflow, which reads
them itself; a URI carrying a credential (a user part, a secret in its query, fragment or path) is refused from every
source (it would be written to summary.json and printed), and the refusal never repeats it. A local store (a SQLite
file, a file store) is held to ``output_dir``'s rules from every source (``suite.recipe.guards.tracking_uri_refusal``).
No mlflow import here: ``suite plan`` and ``suite validate`` show the target cheaply.

``suite gate`` records its verdict only where its caller says (``gate_uri``): MLflow sends the job's credentials to
whatever server it is given, and tracking.json, which names the server the run was logged to, is not signed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from suite.recipe.guards import local_store_paths, tracking_uri_refusal
from suite.runtime.envs import REPO_ROOT
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
    """Refuse a tracking URI that holds a credential, or keeps a local store where run folders may not go, from
    ``--uri``, the recipe or MLflow's environment (``MLFLOW_TRACKING_URI``), naming where it came from (never a
    credential)."""
    for value, source in ((uri, "--uri"), (recipe_uri, "tracking.uri"), (os.environ.get(ENV_URI, "").strip(), ENV_URI)):
        if value and (what := uri_credential(value)):
            raise SuiteError(Problem(source, "", f"the tracking URI holds {what}; it would be written to summary.json "
                                     "and logs", "remove it from the URI and set MLFLOW_TRACKING_USERNAME / "
                                     "MLFLOW_TRACKING_PASSWORD / MLFLOW_TRACKING_TOKEN (or ~/.mlflow/credentials) "
                                     "instead"))
        if value and (why := tracking_uri_refusal(value, REPO_ROOT)) is not None:
            raise SuiteError(Problem(source, "", f"the tracking URI puts MLflow's store where run folders may not "
                                     f"go: {why}", "point it at a folder of your own (e.g. sqlite:////home/me/"
                                     "mlflow/mlflow.db) or at a tracking server"))


def gate_uri(recorded: str | None, uri: str | None = None, recipe_uri: str | None = None) -> tuple[str | None, str]:
    """Where ``suite gate`` records a verdict, and from where: the server its caller names (``--uri``, then the
    ``--recipe``'s ``tracking.uri``, then ``MLFLOW_TRACKING_URI``), never one only the run folder names
    (``recorded``: tracking.json's, unsigned), which could be anyone's and would receive MLflow's credentials. With
    none named, ``recorded`` only when it is a local store (no credential leaves the machine) in a place
    ``check_uris`` allows. (None, why) when there is nowhere to record; SuiteError for a named URI it refuses."""
    check_uris(uri, recipe_uri)
    named = next(((u, w) for u, w in ((uri, "--uri"), (recipe_uri, "--recipe's tracking.uri"),
                                      (os.environ.get(ENV_URI, "").strip(), ENV_URI)) if u), None)
    if named is not None:
        return named
    if recorded and local_store_paths(recorded) and tracking_uri_refusal(recorded, REPO_ROOT) is None:
        return recorded, "tracking.json (a local store)"
    return None, (f"tracking.json names the server {redact(recorded or '')!r}, which this job was not given: the "
                  f"verdict goes only to a server the caller names (fix: set {ENV_URI} to it, or pass --uri, then "
                  "gate again)")
