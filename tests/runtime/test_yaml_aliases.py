"""What YAML aliases may expand to (suite/runtime/yaml_aliases.py): anchors a recipe or task file uses (merge keys, a
shared block) load as before; aliases that add more than MAX_ALIAS_VALUES values, or name their own anchor, are
refused by every YAML reader of the suite with one line naming the file and line."""

from __future__ import annotations

import pytest
import yaml

from suite.recipe.load import load_yaml
from suite.runtime import safeio
from suite.runtime.errors import SuiteError
from suite.runtime.yaml_aliases import MAX_ALIAS_VALUES, alias_problem


def nested(levels: int, width: int = 10) -> str:
    """Anchors each holding ``width`` aliases of the one before: (width^(levels+1) - 1) / (width - 1) values."""
    parts = [f"l0: &a0 [{', '.join(['1'] * width)}]"]
    parts += [f"l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(parts) + "\n"


def test_anchors_real_files_use_still_load():
    text = "base: &b {max_model_len: 2048, seed: 0}\nbf16: {<<: *b, dtype: bfloat16}\nfp8: {<<: *b}\nname: &n x\nalso: *n\n"
    assert alias_problem(text) is None
    assert safeio.loads_yaml(text, "r.yaml", "recipe")["fp8"] == {"max_model_len": 2048, "seed": 0}
    assert load_yaml(nested(3), "r.yaml")["l3"][0][0][0] == [1] * 10  # about 11,000 values: under the cap


def test_aliases_that_expand_past_the_cap_are_refused_by_both_readers():
    assert MAX_ALIAS_VALUES < 111_110  # what nested(4)'s aliases add
    line, what, _ = alias_problem(nested(4))
    assert line == 5 and "expand to more than" in what
    with pytest.raises(SuiteError) as e:
        safeio.loads_yaml(nested(4), "t.yaml", "task")
    assert str(e.value.problems[0]).startswith("t.yaml: line 5: YAML aliases expand to more than 100,000 values")
    with pytest.raises(SuiteError) as e:
        load_yaml(nested(7), "r.yaml")
    assert e.value.problems[0].file == "r.yaml" and e.value.problems[0].field == "line 5"


def test_an_alias_inside_its_own_anchor_is_refused():
    for text in ("a: &x [1, *x]\n", "a: &x {b: [*x]}\n"):
        line, what, _ = alias_problem(text)
        assert line == 1 and "inside its own anchor" in what, text


def test_anchors_belong_to_their_document():
    """An alias of an earlier document's anchor counts as one value here; PyYAML's composer refuses it."""
    text = "a: &s [1, 2]\n---\nb: *s\n"
    assert alias_problem(text) is None
    with pytest.raises(Exception, match="undefined alias"):
        list(yaml.safe_load_all(text))
