"""Issue 48.3: `--set PATH=VALUE` on run / validate / plan (YAML values, paths typed against the schema, applied before
validation, recorded in the run folder's recipe.yaml), `suite init MODEL` (a starter that `suite validate` accepts) and
`suite tasks RECIPE` (its eval.include_path tasks listed too)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from suite import cli
from suite.cli import overrides
from suite.recipe.schema import Recipe

sys_path_orchestrate = ROOT / "tests" / "orchestrate"


def test_values_are_yaml_and_paths_follow_the_schema(demo_recipe_copy):
    recipe = demo_recipe_copy()
    text = overrides.recipe_text(recipe, ["eval.tasks[1].limit=50", "throughput.request_rates=[10, inf]",
                                          "variants[0].engine_args.max_num_seqs=8", "gates.max_drop.suite_gsm8k=0.05",
                                          "description=a run with overrides", "gates.min_throughput_gain=null"])
    assert text.startswith("# recipe.yaml as run, with these overrides from the command line:\n"
                           "# --set eval.tasks[1].limit=50\n")
    r = Recipe.model_validate(yaml.safe_load(text))
    assert r.eval.tasks[1].limit == 50 and r.throughput.request_rates == [10.0, "inf"]
    assert r.variants[0].engine_args["max_num_seqs"] == 8 and r.gates.max_drop == {"suite_gsm8k": 0.05}
    assert r.description == "a run with overrides" and r.gates.min_throughput_gain is None
    assert overrides.recipe_text(recipe, []) is None  # no --set: the file as it is


@pytest.mark.parametrize("item, said", [
    ("eval.taks[0].limit=5", "--set: eval.taks[0].limit: unknown field 'taks' in eval (its fields: "),
    ("eval.tasks[0].limt=5", "unknown field 'limt' in eval.tasks[0] (its fields: "),
    ("eval.tasks.limit=5", "eval.tasks is a list: name an entry by its index, eval.tasks[0].limit"),
    ("name.first=x", "name is a value, not a section: it has no field 'first'"),
    ("gates[0]=1", "gates is not a list: [0] indexes nothing"),
    ("eval.tasks[7].limit=5", "[7] is out of range: the recipe's list has 4 entries"),
    ("eval.tasks[0].limit", "not PATH=VALUE"),
    ("throughput.request_rates=[1, 2", "the value '[1, 2' is not YAML"),
    ("eval.tasks[0].limit=-3", "eval.tasks[0].limit: -3.0 is neither a row count"),  # the schema judges values
])
def test_a_bad_override_is_exit_2_naming_it(demo_recipe_copy, capsys, item, said):
    assert cli.main(["validate", str(demo_recipe_copy()), "--set", item]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_validate_and_plan_take_set(demo_recipe_copy, capsys):
    recipe = str(demo_recipe_copy())
    assert cli.main(["validate", recipe, "--set", "eval.tasks[1].limit=3"]) == 0
    assert "(with 1 --set): ok" in capsys.readouterr().out
    assert cli.main(["plan", recipe, "--set", "eval.tasks[1].limit=3", "--set", "eval.tasks[0].limit=2"]) == 0
    plan = json.loads(capsys.readouterr().out)
    for variant in plan["variants"].values():
        limits = {t["name"]: t["limit"] for t in variant["evaluate"]["tasks"]}
        assert limits["suite_gsm8k"] == 3 and limits["suite_mmlu"] == 2, limits


def test_the_run_folder_records_the_recipe_that_ran(demo_recipe_copy, tmp_path, monkeypatch, capsys):
    """`suite run RECIPE --set ...` (stage processes stood in for): recipe.yaml in the run folder is the recipe with
    the overrides, its sha256 the one the summary records; --resume with --set is refused."""
    import sys

    sys.path.insert(0, str(sys_path_orchestrate))
    from test_resume_promises import accuracy_only, stand_in

    stand_in(tmp_path, monkeypatch)
    assert cli.main(["run", str(accuracy_only(demo_recipe_copy)), "--no-track", "--set", "eval.tasks[1].limit=2"]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    text = (run_dir / "recipe.yaml").read_text()
    assert "# --set eval.tasks[1].limit=2" in text and yaml.safe_load(text)["eval"]["tasks"][1]["limit"] == 2
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["recipe_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert summary["recipe"]["eval"]["tasks"][1]["limit"] == 2
    assert cli.main(["run", "--resume", str(run_dir), "--set", "eval.tasks[1].limit=3"]) == 2
    assert "--resume continues a run with the recipe it was made from" in capsys.readouterr().err


def test_init_writes_a_starter_that_validate_accepts(tmp_path, capsys):
    out = tmp_path / "team" / "recipes" / "starter.yaml"
    model = ROOT / "models" / "smollm2-135m-instruct"
    assert cli.main(["init", str(model), "--out", str(out), "--device", "cpu"]) == 0
    text = out.read_text()
    data = yaml.safe_load(text)
    assert data["name"] == "smollm2-135m-instruct-fp8" and not Path(data["model"]["id"]).is_absolute()
    assert (out.parent / data["model"]["id"]).resolve() == model.resolve() and str(tmp_path) not in text
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 10  # commented
    capsys.readouterr()
    assert cli.main(["validate", str(out)]) == 0, capsys.readouterr().err
    assert cli.main(["init", str(model), "--out", str(out)]) == 2  # never over a file
    assert "exists already" in capsys.readouterr().err

    hub = tmp_path / "hub.yaml"
    assert cli.main(["init", "Qwen/Qwen2.5-0.5B-Instruct", "--out", str(hub), "--device", "cuda"]) == 0
    r = Recipe.model_validate(yaml.safe_load(hub.read_text()))  # the GPU starter: checked on a GPU machine
    assert r.model.id == "Qwen/Qwen2.5-0.5B-Instruct" and r.variants[0].quantization.scheme == "FP8_DYNAMIC"
    assert cli.main(["init", str(tmp_path / "no-such-folder"), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "is not a folder here, nor a hub id" in capsys.readouterr().err


def test_tasks_lists_the_recipes_include_path_tasks(demo_recipe_copy, tmp_path, capsys):
    from test_include_path import team_tasks

    team_tasks(tmp_path / "team-tasks")
    recipe = demo_recipe_copy(eval__include_path=str(tmp_path / "team-tasks"))
    assert cli.main(["tasks", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tasks/ (the suite's own):\n") and "* suite_gsm8k" in out
    assert f"eval.include_path: {tmp_path / 'team-tasks'}\n    team_mc" in out, out
    assert cli.main(["tasks"]) == 0 and "team_mc" not in capsys.readouterr().out
    missing = demo_recipe_copy(eval__include_path=str(tmp_path / "nowhere"))
    assert cli.main(["tasks", str(missing)]) == 2 and "eval.include_path: folder not found" in capsys.readouterr().err
