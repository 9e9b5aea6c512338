"""Found by the adversarial review: a recipe is read with a byte cap and a nesting cap, but not a cap on what its YAML
aliases expand to. A few hundred bytes of anchors (each list holding ten aliases of the one before) are 10^8 values;
`suite validate` says ok (the parsed object shares them), then `suite plan` (and `suite run`) walk or serialise the
expanded value and grow without bound (6.6 GB after 90 s on the test host) instead of one line and exit 2."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from conftest import ROOT


def alias_bomb(levels: int) -> str:
    """A flow mapping whose last entry expands to 10^(levels+1) integers."""
    parts = ["l0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    parts += [f"l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "{" + ", ".join(parts) + "}"


def bomb_recipe(demo_recipe_copy, levels: int = 7):
    """The demo recipe with the bomb as the baseline's ``hf_overrides`` (an engine argument whose value is a mapping)."""
    path = demo_recipe_copy()
    text = path.read_text().replace("engine_args:", "engine_args:\n    hf_overrides: HF_BOMB", 1)
    path.write_text(text.replace("HF_BOMB", alias_bomb(levels)))
    return path


def limited(cmd: list[str], seconds: int, gib: int = 3) -> subprocess.CompletedProcess | None:
    """``cmd`` with an address-space cap and a timeout (a run-away must not take the shared host's memory); None when
    it was still running at the timeout."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=seconds, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        return None


def test_the_bomb_is_small_and_shallow(demo_recipe_copy):
    path = bomb_recipe(demo_recipe_copy)
    assert path.stat().st_size < 5000  # far under the recipe's byte cap, nesting 9 levels


def test_validate_refuses_a_recipe_whose_aliases_expand_without_bound(demo_recipe_copy):
    path = bomb_recipe(demo_recipe_copy)
    p = limited([sys.executable, "-m", "suite", "validate", str(path)], 120)
    assert p is not None and p.returncode == 2 and "alias" in p.stderr.lower(), p and (p.stdout + p.stderr)[-2000:]


def test_plan_refuses_a_recipe_whose_aliases_expand_without_bound(demo_recipe_copy):
    path = bomb_recipe(demo_recipe_copy)
    p = limited([sys.executable, "-m", "suite", "plan", str(path)], 45)
    assert p is not None and p.returncode == 2, p and (p.stdout + p.stderr)[-2000:]
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 3
