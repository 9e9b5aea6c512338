"""docs/02-recipe-reference.md is generated from the recipe's schema: a field added or described anew without
running the generator leaves the page behind (it once lacked the top-level ``store``)."""

from __future__ import annotations

from tools import gen_recipe_reference


def test_the_recipe_reference_is_the_schema_rendered(capsys):
    assert gen_recipe_reference.main(["--check"]) == 0, capsys.readouterr().out
