"""Where the gates come from, trusted: ``--policy FILE``, ``--recipe FILE`` (the team's own recipe, whose sha256 must be
the ``recipe_sha256`` the run recorded) or, with neither, the run folder's ``recipe.yaml`` under the same hash check;
summary.json's copy of the recipe must then equal that recipe (``check_copy``: the run's structure, its tasks,
variants, baseline, headline rule and seed, is read from it); with ``--policy`` the run folder's recipe.yaml, when there
is one, is still hash-checked and compared. The run folder's copies never loosen anything: an edit to either is refused (bad input), naming both hashes or the differing gates."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from suite.runtime import safeio
from suite.recipe.loaded import fields_that_differ
from suite.runtime.errors import Problem, SuiteError
from suite.recipe import Recipe, load_yaml, read_text, validation_problems, GateSpec

FIX_RECIPE = "gate with the recipe from your repository (`suite gate RUN --recipe RECIPE`) or a --policy file"


def _trusted_recipe(path: Path, recorded: str, what: str):
    """The recipe at ``path`` (a Recipe), refused unless its sha256 is the ``recipe_sha256`` the run recorded."""
    text = read_text(path)
    got = hashlib.sha256(text.encode()).hexdigest()
    if got != recorded:
        raise SuiteError(Problem(str(path), "", f"{what} has sha256 {got}, but the run recorded recipe_sha256 "
                                 f"{recorded}: it is not the recipe the run was made from", FIX_RECIPE))
    try:
        return Recipe.model_validate(load_yaml(text, str(path)))
    except ValidationError as e:
        problems = validation_problems(str(path), e)
        for p in problems:
            p.message = f"{what} is not a valid recipe: {p.message}"
        raise SuiteError(problems) from None


def _recipe_gates(path: Path, recorded: str, what: str):
    return _trusted_recipe(path, recorded, what).gates


# resolved when the recipe is loaded (the packaged task data of a recipe that does not set it): not the recipe's text
_SET_AT_LOAD = {"eval.data_dir"}




def check_copy(summary, trusted, where: str, source: str) -> None:
    """summary.json's copy of the recipe must be the trusted recipe ``trusted`` (a Recipe from ``where``): the run's
    structure (tasks, variants, baseline, headline rule, seed, gates) is read from that copy, so an edit to it (a
    failing task or variant dropped from summary.json alone) is refused, naming the fields that differ."""
    want = trusted.model_dump(mode="json")
    try:
        have = Recipe.model_validate(summary.recipe or {}).model_dump(mode="json")
    except ValidationError as e:
        first = e.errors()[0]
        raise SuiteError(Problem(source, "recipe", f"the run's recipe copy is not a valid recipe: "
                                 f"{'.'.join(map(str, first['loc']))}: {first['msg']}", FIX_RECIPE)) from None
    differ = [f for f in fields_that_differ(have, want) if f not in _SET_AT_LOAD]
    if differ:
        raise SuiteError(Problem(source, "recipe." + ", recipe.".join(differ[:8]) + (" ..." if len(differ) > 8 else ""),
                                 f"differs from {where} (sha256 as recorded): the run's structure (tasks, variants, "
                                 "baseline, headline rule, seed, gates) must be the trusted recipe's", FIX_RECIPE))


def choose(summary, run: str, source: str, policy_file: str | None, recipe_file: str | None, load_policy):
    """(GateSpec, label for the table, the policy file's sha256 or None); ``load_policy``: reads a --policy file
    (``suite.analysis.gate.load_policy``)."""
    if policy_file and recipe_file:
        raise SuiteError(Problem("--policy/--recipe", "", "both given: the gates come from one place",
                                 "give --recipe (the recipe's gates) or --policy (a gates: block), not both"))
    folder = Path(run) if Path(run).is_dir() else Path(run).parent
    copy = folder / "recipe.yaml"
    if policy_file:
        sha = safeio.sha256(policy_file, "policy") if Path(policy_file).is_file() else None
        spec = load_policy(policy_file)
        if copy.is_file():  # the policy replaces the gates only: the run's structure still comes from its recipe
            check_copy(summary, _trusted_recipe(copy, summary.recipe_sha256, "the run folder's recipe.yaml"),
                       str(copy), source)
        return spec, f"policy {policy_file} (sha256 {(sha or '')[:12]}), instead of the recipe's gates", sha
    if recipe_file:
        trusted = _trusted_recipe(Path(recipe_file), summary.recipe_sha256, f"--recipe {recipe_file}")
        check_copy(summary, trusted, recipe_file, source)
        return trusted.gates, f"the gates of {recipe_file} (sha256 {summary.recipe_sha256[:12]}, as recorded)", None
    if not copy.is_file():
        raise SuiteError(Problem(str(copy), "", "no recipe.yaml in the run folder to take the gates from", FIX_RECIPE))
    trusted = _trusted_recipe(copy, summary.recipe_sha256, "the run folder's recipe.yaml")

    spec = trusted.gates
    try:
        copied = GateSpec.model_validate((summary.recipe or {}).get("gates") or {})
    except ValidationError:
        copied = None
    if copied is None or copied.model_dump() != spec.model_dump():
        raise SuiteError(Problem(source, "recipe.gates", f"differs from the gates of {copy} (sha256 as recorded): "
                                 f"{(summary.recipe or {}).get('gates')} against {spec.model_dump(exclude_defaults=True)}",
                                 FIX_RECIPE))
    check_copy(summary, trusted, str(copy), source)
    return spec, "the recipe's gates (recipe.yaml, sha256 as recorded)", None
