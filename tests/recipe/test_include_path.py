"""eval.include_path: the team's own lm-eval task folders, checked by `suite validate`, passed to the evaluate stage,
keyed by content, and (integration) scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import needs_demo_model
from suite.plan.planner import make_plan
from suite.recipe import SuiteError, load_recipe

ROWS = [("The sky on a clear day is", ["blue", "green", "red", "black"], 0),
        ("Two plus two equals", ["three", "four", "five", "six"], 1),
        ("Water freezes at zero degrees", ["Fahrenheit", "Kelvin", "Celsius", "Rankine"], 2),
        ("The opposite of hot is", ["warm", "loud", "big", "cold"], 3)]


def team_tasks(folder: Path, name: str = "team_mc") -> Path:
    """A 4-item multiple-choice lm-eval task on local data (its data file by absolute path: the evaluate stage
    reads tasks from eval.data_dir)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "items.jsonl"
    data.write_text("".join(json.dumps({"q": q, "choices": c, "answer": a}) + "\n" for q, c, a in ROWS))
    (folder / f"{name}.yaml").write_text(f"""task: {name}
dataset_path: json
dataset_kwargs:
  data_files: {{test: {data}}}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
""")
    return folder


def recipe(demo_recipe_copy, include, tasks=("team_mc",)):
    return demo_recipe_copy(eval__include_path=include, eval__tasks=[{"name": t} for t in tasks])


@needs_demo_model()
def test_include_path_tasks_are_planned_and_keyed_by_content(demo_recipe_copy, tmp_path):
    from suite.plan.keys import cache_key

    folder = team_tasks(tmp_path / "team-tasks")
    plan = make_plan(load_recipe(recipe(demo_recipe_copy, "team-tasks")), tmp_path / "run")  # relative to the recipe
    ev = plan.variants[0].evaluate
    assert ev.extra_include_paths == [str(folder)] and [t.name for t in ev.tasks] == ["team_mc"]
    before = cache_key(ev, "m", versions={})
    (folder / "team_mc.yaml").write_text((folder / "team_mc.yaml").read_text().replace('" "', '": "'))
    assert cache_key(ev, "m", versions={}) != before  # another prompt format: another evaluation


@needs_demo_model()
def test_validate_refuses_a_missing_folder_and_a_task_not_in_it(demo_recipe_copy, tmp_path):
    with pytest.raises(SuiteError) as e:
        load_recipe(recipe(demo_recipe_copy, "nowhere"))
    assert "eval.include_path: folder not found" in str(e.value)
    team_tasks(tmp_path / "team-tasks")
    with pytest.raises(SuiteError) as e:
        load_recipe(recipe(demo_recipe_copy, ["team-tasks"], tasks=("team_mq",)))
    assert "eval.tasks[0].name: unknown task 'team_mq'; did you mean 'team_mc'?" in str(e.value)


@pytest.mark.integration
@needs_demo_model()
def test_an_include_path_task_is_scored_by_the_evaluate_stage(demo_recipe_copy, tmp_path):
    from suite.orchestrate.jobs import run_stage
    from suite.runtime.envs import stage_env

    team_tasks(tmp_path / "team-tasks")
    plan = make_plan(load_recipe(recipe(demo_recipe_copy, "team-tasks")), tmp_path / "run")
    vp = plan.variants[0]
    # the environment `suite run` gives a stage: the recipe's runtime.env over this process's (PATH included: with
    # the recipe's alone, torch's compile of vLLM's prompt-logprob ranking ran a g++ that found neither cc1plus nor ld)
    outcome = run_stage("evaluate", vp.evaluate, tmp_path / "run" / "bf16", stage_env(plan.env))
    assert outcome.result is not None, outcome
    (score,) = outcome.result.scores
    assert score.task == "team_mc" and score.metric == "acc,none" and score.n == 4 and 0 <= score.value <= 1
