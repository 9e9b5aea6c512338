"""What a YAML document's aliases expand to, counted on its event stream before it is composed: the cap on alias
expansion that every YAML the suite reads is held to (``safeio.loads_yaml``, ``recipe.load.load_yaml``).

A few hundred bytes of anchors, each a list of ten aliases of the one before, are 10^8 values: PyYAML's object shares
them, so the byte and nesting caps pass it, but whatever walks or writes the value out (a plan, a run folder's
recipe copy, a JSON dump) expands it. An alias inside its own anchor makes a value that holds itself, which no dump
can end. Only the standard library and PyYAML: the records' safe reader imports this.
"""

from __future__ import annotations

import yaml

MAX_ALIAS_VALUES = 100_000  # values aliases may add to a document (each alias adds its anchor's value, expanded)


def alias_problem(text: str, loader=yaml.SafeLoader) -> tuple[int, str, str] | None:
    """(line, what is wrong, fix) for YAML whose aliases add more than MAX_ALIAS_VALUES values or name an anchor
    still open, else None. Each anchored value's expanded size is counted as its end event arrives."""
    sizes: dict[str, int] = {}
    stack: list[list] = [[0, None]]  # [values so far, anchor] of each collection open
    added = 0
    for ev in yaml.parse(text, Loader=loader):
        n = 1
        if isinstance(ev, yaml.DocumentStartEvent):  # anchors belong to one document
            sizes, stack = {}, [[0, None]]
            continue
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            stack.append([1, ev.anchor])
            continue
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            n, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = n
        elif isinstance(ev, yaml.AliasEvent):
            line = ev.start_mark.line + 1
            if any(anchor == ev.anchor for _, anchor in stack):
                return line, f"YAML alias *{ev.anchor} inside its own anchor (a value that holds itself; not loaded)", \
                    "write the value out instead of the alias"
            n = sizes.get(ev.anchor, 1)
            added += n
            if added > MAX_ALIAS_VALUES:
                return line, f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values (not loaded)", \
                    "write the values out, or use fewer aliases: no file the suite reads needs them to expand that far"
        elif isinstance(ev, yaml.ScalarEvent):
            if ev.anchor is not None:
                sizes[ev.anchor] = 1
        else:
            continue
        stack[-1][0] += n
    return None
