"""Where the gates come from, trusted: ``--policy FILE``, ``--recipe FILE`` (the team's own recipe, whose sha256 must be
the ``recipe_sha256`` the run recorded) or, with neither, the run folder's ``recipe.yaml`` under the same hash check;
summary.json's copy of ``recipe.gates`` must then equal that recipe's gates. The run folder's copies never loosen
anything: an edit to either is refused (bad input), naming both hashes or the differing gates."""

from __future__ import annotations

import hashlib
from pathlib import Path

from suite.runtime.errors import Problem, SuiteError

FIX_RECIPE = "gate with the recipe from your repository (`suite gate RUN --recipe RECIPE`) or a --policy file"


def _recipe_gates(path: Path, recorded: str, what: str):
    from pydantic import ValidationError

    from suite.recipe import Recipe, load_yaml, read_text, validation_problems

    text = read_text(path)
    got = hashlib.sha256(text.encode()).hexdigest()
    if got != recorded:
        raise SuiteError(Problem(str(path), "", f"{what} has sha256 {got}, but the run recorded recipe_sha256 "
                                 f"{recorded}: it is not the recipe the run was made from", FIX_RECIPE))
    try:
        return Recipe.model_validate(load_yaml(text, str(path))).gates
    except ValidationError as e:
        raise SuiteError(validation_problems(str(path), e)) from None


def choose(summary, run: str, source: str, policy_file: str | None, recipe_file: str | None, load_policy):
    """(GateSpec, label for the table, the policy file's sha256 or None); ``load_policy``: reads a --policy file
    (``suite.analysis.gate.load_policy``)."""
    if policy_file and recipe_file:
        raise SuiteError(Problem("--policy/--recipe", "", "both given: the gates come from one place",
                                 "give --recipe (the recipe's gates) or --policy (a gates: block), not both"))
    if policy_file:
        sha = hashlib.sha256(Path(policy_file).read_bytes()).hexdigest() if Path(policy_file).is_file() else None
        spec = load_policy(policy_file)
        return spec, f"policy {policy_file} (sha256 {(sha or '')[:12]}), instead of the recipe's gates", sha
    if recipe_file:
        spec = _recipe_gates(Path(recipe_file), summary.recipe_sha256, f"--recipe {recipe_file}")
        return spec, f"the gates of {recipe_file} (sha256 {summary.recipe_sha256[:12]}, as recorded)", None
    folder = Path(run) if Path(run).is_dir() else Path(run).parent
    copy = folder / "recipe.yaml"
    if not copy.is_file():
        raise SuiteError(Problem(str(copy), "", "no recipe.yaml in the run folder to take the gates from", FIX_RECIPE))
    spec = _recipe_gates(copy, summary.recipe_sha256, "the run folder's recipe.yaml")
    from pydantic import ValidationError

    from suite.recipe import GateSpec

    try:
        copied = GateSpec.model_validate((summary.recipe or {}).get("gates") or {})
    except ValidationError:
        copied = None
    if copied is None or copied.model_dump() != spec.model_dump():
        raise SuiteError(Problem(source, "recipe.gates", f"differs from the gates of {copy} (sha256 as recorded): "
                                 f"{(summary.recipe or {}).get('gates')} against {spec.model_dump(exclude_defaults=True)}",
                                 FIX_RECIPE))
    return spec, "the recipe's gates (recipe.yaml, sha256 as recorded)", None
