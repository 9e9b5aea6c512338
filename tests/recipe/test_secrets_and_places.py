"""Secrets never shown, places never bypassed (issue 47 part 6): a tracking URI from any source (recipe, MLflow's
environment, `suite sync --uri`) holding a credential is refused without repeating it; no error line repeats a
refused value's credential; `suite run --out` is held to output_dir's rules; `suite.run(recipe, **overrides)`
writes the recipe that runs into the run folder (a resume reads it unchanged) and its overrides are bounded."""

from __future__ import annotations

import pytest
import yaml

import suite.api
from suite import cli
from suite.orchestrate import rundir
from suite.orchestrate.runner import RunInterrupted
from suite.recipe.load import load_run_recipe

SECRET_URIS = {
    "password": "http://me:hunter2@mlflow:5000",
    "token as the user name": "https://ghp_hunter2hunter2hunter2@mlflow:5000",
    "token in the query": "http://mlflow:5000/?token=hunter2",
    "signature in the fragment": "http://mlflow:5000/#sig=hunter2",
    "percent-encoded query": "http://mlflow:5000/%3Faccess_token%3Dhunter2",
}


def one_error(capsys) -> str:
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err and "hunter2" not in out + err, out + err
    return lines[0]


@pytest.mark.parametrize("case", list(SECRET_URIS))
def test_a_credential_in_mlflows_environment_is_refused_by_validate_and_run(case, demo_recipe_copy, monkeypatch,
                                                                               capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", SECRET_URIS[case])
    path = str(demo_recipe_copy())
    assert cli.main(["validate", path]) == 2
    assert one_error(capsys).startswith("error: MLFLOW_TRACKING_URI: the tracking URI holds")
    assert cli.main(["run", path]) == 2  # before a run folder is made
    assert one_error(capsys).startswith("error: MLFLOW_TRACKING_URI: ")


@pytest.mark.parametrize("case", list(SECRET_URIS))
def test_a_credential_in_sync_uri_is_refused(case, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert cli.main(["sync", str(tmp_path), "--uri", SECRET_URIS[case]]) == 2
    assert one_error(capsys).startswith("error: --uri: the tracking URI holds")


# refused values that carry a credential: the error names the field and never repeats it
LEAKY = {
    "baseline model URL": ({"baseline__model": "https://user:hunter2@hub.example/m"}, "baseline"),
    "data_dir URL": ({"eval__data_dir": "https://user:hunter2@hub.example/d"}, "eval.data_dir"),
    "include_path URL": ({"eval__include_path": "https://user:hunter2@hub.example/t"}, "eval.include_path"),
    "calibration URL": ({"variants__0__quantization__calibration": "https://u:hunter2@hub.example/c"},
                        "variants[0].quantization.calibration"),
    "name that is a URL": ({"name": "https://user:hunter2@hub.example/m"}, "name"),
    "token query in a name": ({"name": "https://hub.example/m?token=hunter2"}, "name"),
    "a hub id with a token in it": ({"variants__0": {"name": "ck", "model": "org/m?x=hf_hunter2hunter2hunter2"}},
                                    "variants[0].model.id"),
}


@pytest.mark.parametrize("case", list(LEAKY))
def test_no_error_repeats_a_credential(case, demo_recipe_copy, capsys):
    changes, field = LEAKY[case]
    assert cli.main(["validate", str(demo_recipe_copy(**changes))]) == 2
    out, err = capsys.readouterr()
    assert f": {field}" in err and "hunter2" not in out + err and "Traceback" not in err, err


@pytest.mark.parametrize("out", ["/var/lib/suite-x", "/etc/suite-runs", "/", "/usr/local/runs"])
def test_run_out_is_held_to_output_dirs_rules(out, demo_recipe_copy, capsys):
    assert cli.main(["run", str(demo_recipe_copy()), "--out", out, "--no-track"]) == 2
    line = one_error(capsys)
    assert line.startswith("error: suite run: --out (output_dir): ") and "run folders may not go there" in line


def _stop_when_started(*event):
    if event[:3] == ("run", "", "started"):
        raise KeyboardInterrupt  # the run folder and its recipe.yaml exist; no stage has started


def test_an_api_override_is_what_the_run_folder_records_and_resumes_with(demo_recipe_copy, tmp_path):
    path = demo_recipe_copy()
    with pytest.raises(RunInterrupted) as e:
        suite.api.run(path, track=False, report=_stop_when_started, eval={"limit": 2, "max_gen_toks": 32})
    run_dir = e.value.run_dir
    copy = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    assert copy["eval"]["limit"] == 2 and copy["eval"]["max_gen_toks"] == 32
    resumed = load_run_recipe(run_dir, serving=False)
    assert resumed.recipe.eval.max_gen_toks == 32
    assert rundir.recipe_changes(run_dir, resumed) is None  # `--resume` is not refused as "changed since it began"


@pytest.mark.parametrize("override, said", [
    ({"eval": {"limit": object()}}, "eval.limit: a object is not a YAML value"),
    ({"description": {"a": {1: 2}}}, "description.a: a key that is not a string"),
])
def test_overrides_are_plain_yaml_values(override, said, demo_recipe_copy):
    with pytest.raises(suite.api.SuiteError) as e:
        suite.api.load(demo_recipe_copy(), **override)
    assert said in str(e.value)


def test_deep_or_cyclic_overrides_are_refused_without_a_recursion_error(demo_recipe_copy):
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["x"] = {}
        node = node["x"]
    cyclic: list = []
    cyclic.append(cyclic)
    for override in ({"description": deep}, {"description": cyclic}):
        with pytest.raises(suite.api.SuiteError) as e:
            suite.api.load(demo_recipe_copy(), **override)
        assert "nested more than 64 levels deep" in str(e.value)
