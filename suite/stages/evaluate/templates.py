"""Compile each of lm-eval's prompt templates once, not once per render.

lm-eval 0.4.13 renders a task's ``doc_to_text``, ``doc_to_target`` and ``doc_to_choice`` Jinja templates through
``lm_eval.utils.apply_template``, which calls ``env.from_string(template)`` on every call: Jinja's
``Environment.from_string`` never caches, so each render parses and compiles the template to Python again. A 5-shot
multiple-choice question renders ~20 templates, and building the requests of MMLU, GSM8K, HumanEval and C-Eval
(16,871 questions) took minutes of the host's CPU per variant, several times the GPU work. lm-eval knows (EleutherAI/lm-evaluation-harness#1286, open; #3756 proposes a
render cache keyed by the document's ``id``).

This keeps lm-eval's environment and renders every call as before; only the compiled ``Template`` is reused, keyed
by the template's text, so every prompt is the same string it was (tests/stages/evaluate/test_templates.py builds
the four tasks' requests both ways and compares them). Called in the evaluate stage's process before any task is
built. Written here rather than waiting for lm-eval because the stage's time is a target of its own (issue 16).
"""

from __future__ import annotations

import functools

_MARK = "_suite_compiled_once"


def compile_templates_once(maxsize: int = 4096) -> None:
    """Replace ``lm_eval.utils.apply_template`` with one that compiles each distinct template text once (an LRU of
    ``maxsize`` templates) in lm-eval's own environment. Idempotent. Every caller in lm-eval 0.4.13 goes through
    the module attribute (``utils.apply_template``), so they all get it."""
    import lm_eval.utils as lm_utils

    if getattr(lm_utils.apply_template, _MARK, False):
        return
    original = lm_utils.apply_template
    compiled = functools.lru_cache(maxsize=maxsize)(lm_utils.env.from_string)

    def apply_template(template: str, doc: dict) -> str:
        if not isinstance(template, str):  # not a text template: lm-eval's own path, whatever it does with it
            return original(template, doc)
        return compiled(template).render(**doc)

    setattr(apply_template, _MARK, True)
    apply_template.__doc__ = original.__doc__
    lm_utils.apply_template = apply_template
