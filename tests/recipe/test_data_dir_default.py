"""eval.data_dir's default: ``../tasks/data`` beside the recipe when that folder exists (the checkout's recipes/),
else the suite's own copy of the task data (suite._data: what an installed wheel carries), so a recipe outside
the checkout runs without setting it. A data_dir the recipe sets is never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DEMO_RECIPE, ROOT, needs_demo_model
from suite._data import folder
from suite.plan.planner import make_plan
from suite.recipe import SuiteError, load_recipe


@needs_demo_model()
def test_a_recipe_without_data_dir_and_no_tasks_beside_it_reads_the_packaged_data(demo_recipe_copy, DELETE, tmp_path):
    loaded = load_recipe(demo_recipe_copy(eval__data_dir=DELETE), serving=False)
    assert Path(loaded.recipe.eval.data_dir) == folder("tasks") / "data"
    plan = make_plan(loaded, tmp_path / "run")
    assert Path(plan.variants[0].evaluate.data_dir) == folder("tasks") / "data"  # the plan shows it


@needs_demo_model()
def test_the_folder_beside_the_recipe_wins_and_a_set_data_dir_is_kept(demo_recipe_copy, DELETE, tmp_path):
    beside = tmp_path / "tasks" / "data"  # ../tasks/data relative to a recipe in tmp_path/recipes
    beside.mkdir(parents=True)
    (tmp_path / "recipes").mkdir()
    moved = tmp_path / "recipes" / "recipe.yaml"
    moved.write_text(demo_recipe_copy(eval__data_dir=DELETE).read_text())
    with pytest.raises(SuiteError) as e:  # the (empty) folder beside the recipe is the one read and checked
        load_recipe(moved, serving=False)
    assert f"missing under {beside.resolve()}," in str(e.value)
    with pytest.raises(SuiteError) as e:  # set, missing: refused, not replaced by the packaged copy
        load_recipe(demo_recipe_copy(eval__data_dir=str(tmp_path / "nowhere")), serving=False)
    assert "eval.data_dir" in str(e.value)


def test_the_demo_recipe_in_the_checkout_keeps_its_own_folder():
    loaded = load_recipe(DEMO_RECIPE, serving=False)
    assert loaded.resolve(loaded.recipe.eval.data_dir) == ROOT / "tasks" / "data"
