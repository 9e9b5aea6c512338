"""Where a run is logged: `suite sync --uri`, then the recipe's tracking section, then MLflow's own environment
(MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME), then the local default; shown by `suite validate` and `suite plan`."""

from __future__ import annotations

import pytest

from suite.outputs.tracking_target import target
from suite.recipe import load_recipe
from suite.runtime.errors import SuiteError


def test_the_precedence_is_flag_recipe_environment_default(demo_recipe_copy, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    plain = load_recipe(demo_recipe_copy()).recipe
    t = target(plain, tmp_path)
    assert (t.uri, t.uri_from, t.experiment, t.experiment_from) == (
        f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}", "default", "demo-cpu", "recipe name")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team:5000")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "fp8-releases")
    t = target(plain, tmp_path)
    assert (t.uri, t.uri_from, t.experiment, t.experiment_from) == (
        "http://team:5000", "MLFLOW_TRACKING_URI", "fp8-releases", "MLFLOW_EXPERIMENT_NAME")
    own = load_recipe(demo_recipe_copy(tracking={"uri": "http://mine:5000", "experiment": "mine"})).recipe
    t = target(own, tmp_path)
    assert (t.uri, t.uri_from, t.experiment, t.experiment_from) == ("http://mine:5000", "recipe", "mine", "recipe")
    assert target(own, tmp_path, uri="http://flag:1").uri_from == "--uri"


def test_a_password_in_the_environments_uri_is_refused(demo_recipe_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://me:hunter2@team:5000")
    with pytest.raises(SuiteError) as e:
        target(load_recipe(demo_recipe_copy()).recipe, tmp_path)
    assert "MLFLOW_TRACKING_PASSWORD" in str(e.value) and "hunter2" not in str(e.value)


def test_plan_and_validate_show_the_target(demo_recipe_copy, monkeypatch, capsys):
    from suite import cli

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team:5000")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    recipe = str(demo_recipe_copy())
    assert cli.main(["plan", recipe]) == 0
    out, err = capsys.readouterr()
    assert "tracking: http://team:5000 (from MLFLOW_TRACKING_URI), experiment 'demo-cpu' (from recipe name)" in err
    assert out.lstrip().startswith("{")  # stdout stays the plan's JSON
    assert cli.main(["validate", recipe]) == 0
    assert "tracking: http://team:5000 (from MLFLOW_TRACKING_URI)" in capsys.readouterr().out
