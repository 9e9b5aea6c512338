"""The gate registry: a gate is one module that declares its recipe field (a ``GateSpec`` field), the metrics it reads
and its check; ``suite.analysis.gate.run`` iterates ``GATES`` (a ``suite.records.registry.Registry``) in registration
order for every variant but the baseline. A team adds a gate with ``@register_gate(...)`` or, from a package outside
``suite``, with an entry point of the group ``suite.gates`` naming a ``Gate`` (``NAME = module:GATE``); a gate reads
a ``GateSpec`` field (a new field also needs its line in ``GateSpec``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from suite.analysis.gates.base import GateCheck
from suite.records.registry import Registry
from suite.records.summary import RunSummary, VariantSummary


@dataclass
class Context:
    """What a gate's check sees for one variant: ``r`` (a ``gates.reader.Reader``) reads numbers, each checked against
    its record; ``bad(field, what, fix)`` reports bad input; ``add`` appends a check."""
    summary: RunSummary
    v: VariantSummary
    base: VariantSummary
    r: object
    policy: object  # the GateSpec
    accuracy_tasks: list[str]
    ppl_tasks: list[str]
    bad: Callable[[str, str, str], None]
    headline: str = "max"
    said: set[str] = field(default_factory=set)  # messages given once per run (the baseline's, not once per variant)
    checks: list[GateCheck] = field(default_factory=list)

    def add(self, c: GateCheck) -> GateCheck:
        self.checks.append(c)
        return c

    def setting(self, name: str, task: str | None = None):
        """The policy's threshold ``name`` (for ``task``: its per-task value, else ``default_<name>``), or None."""
        value = getattr(self.policy, name, None)
        if task is None or not isinstance(value, dict):
            return value
        return value.get(task, getattr(self.policy, f"default_{name}", None))


@dataclass(frozen=True)
class Gate:
    name: str  # its key in GATES
    field: str  # the GateSpec field whose threshold it reads
    reads: tuple[str, ...]  # the metric keys it reads ('<task>' stands for each task)
    check: Callable[[Context], None]


GATES: Registry[Gate] = Registry("gate", "suite.gates", base=Gate, name_of=lambda g: g.name)


def register_gate(field: str, reads: tuple[str, ...] = (), name: str | None = None):
    """Decorator: register ``check(ctx)`` as the gate ``name`` (default: ``field``) reading GateSpec ``field``. A
    name registered again replaces the earlier gate."""
    def wrap(fn: Callable[[Context], None]):
        key = name or field
        GATES.register(key, Gate(key, field, tuple(reads), fn))
        return fn
    return wrap


def unregister_gate(name: str) -> None:
    GATES.unregister(name)
