"""One registry shape for every kind of plug-in (stages, gates, outputs, schemes, commands): named entries in order.

An entry is an object, or a lazy ``"module:object"`` string (``"module"`` alone: the module itself) imported on first
use, as lm-eval's ``lm_eval/api/registry.py`` does. Entries are registered by call (``reg.register(name, target)``)
or by decorator (``@reg.register(name)``), and found in the Python entry points of the registry's group
(``suite.stages``, ``suite.gates``, ``suite.outputs``, ``suite.schemes``, ``suite.commands``): a package outside
``suite`` adds one with a line under ``[suite.gates]`` in its ``entry_points.txt`` (``pyproject.toml``:
``[project.entry-points."suite.gates"]``). Entry points are read on the first lookup, in every process that looks
(a stage process too). Standard library only: it sits on the ground floor and runs in every stage environment.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Mapping
from importlib import metadata
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
_UNSET: Any = object()


class RegistryError(LookupError):
    """A registry entry that cannot be used (unknown name, a target that does not load or is of the wrong kind, a
    clash); ``problems`` holds its one line ``WHERE: NAME: what is wrong (fix: ...)``, as ``SuiteError`` does."""

    def __init__(self, where: str, name: str, what: str, fix: str):
        self.problems = [f"{where}: {name}: {what} (fix: {fix})"]
        super().__init__(self.problems[0])

    def __str__(self) -> str:  # KeyError would quote it; one plain line
        return self.problems[0]


class UnknownName(RegistryError, KeyError):
    """A name the registry does not hold (a KeyError, so ``Mapping.get`` and ``in`` work as for a dict)."""


def resolve(ref: str) -> Any:
    """The object ``"module:object"`` names (``"module"``: the module), importing its module."""
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


_BY_GROUP: dict[str, "Registry"] = {}  # group -> its registry, for a reader on a lower floor (``of_group``)


def of_group(group: str) -> "Registry":
    """The registry of entry-point ``group`` (``suite.stages``...), for code on a floor below the module that makes it
    (the summary's records type each stage's result by the stage registry's entry). RegistryError when none is made
    in this process yet."""
    try:
        return _BY_GROUP[group]
    except KeyError:
        raise RegistryError("the registries", group, "no registry of that group is loaded in this process",
                            f"import the module that makes it (for {STAGE_GROUP}: suite.stages.registry) "
                            "before reading a record that needs it") from None


STAGE_GROUP = "suite.stages"  # the stage registry's entry-point group (suite.stages.registry.STAGES)


class Registry(Mapping, Generic[T]):
    """Named entries of one ``kind`` in registration order; a mapping name -> object (lookups load lazy entries).

    ``group``: the entry-point group read on first use. ``base``: the type every entry must be (checked when it
    loads). ``name_of``: an entry's own name, which must be the one it is registered under. ``last``: the name that
    stays last (a new entry goes just before it)."""

    def __init__(self, kind: str, group: str, *, base: type | tuple[type, ...] | None = None,
                 name_of: Callable[[Any], str] | None = None, last: str | None = None):
        self.kind, self.group, self.base, self.name_of, self.last = kind, group, base, name_of, last
        self._entries: dict[str, Any] = {}
        self._origin: dict[str, str] = {}  # name -> the entry point it came from, as an error line names it
        self._entry_points: dict[str, str] = {}  # name -> the 'module:object' of the entry point it came from
        self._discovered = False
        self._lock = threading.RLock()
        _BY_GROUP[group] = self  # the last registry made for a group is the one ``of_group`` answers

    # registration ---------------------------------------------------------------------------------------------------

    def register(self, name: str, target: Any = _UNSET, *, before: str | None = None):
        """Register ``target`` (an object or a ``"module:object"`` string) as ``name``, or, without ``target``, return
        a decorator that registers what it decorates. A name registered again is replaced in place; a new one goes
        last, or just before ``before`` (or before the registry's ``last``)."""
        if target is _UNSET:
            def decorate(obj):
                self.register(name, obj, before=before)
                return obj
            return decorate
        with self._lock:
            if not isinstance(target, str):
                self._check(name, target, f"the {self.kind} registry")
            self._put(name, target, before if before is not None else self.last)
            self._origin.pop(name, None)
            self._entry_points.pop(name, None)
        return target

    def unregister(self, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)
            self._origin.pop(name, None)
            self._entry_points.pop(name, None)

    def _put(self, name: str, target: Any, before: str | None) -> None:
        if name in self._entries or before is None or before not in self._entries or before == name:
            self._entries[name] = target
            return
        items = list(self._entries.items())
        at = [n for n, _ in items].index(before)
        self._entries = dict(items[:at] + [(name, target)] + items[at:])

    # entry points ---------------------------------------------------------------------------------------------------

    def discover(self, again: bool = True) -> None:
        """Read the group's entry points (``again``: the path afresh, so that a folder added to ``sys.path`` since
        counts; else the process's one reading, shared by the registries). An entry point whose name a built-in or
        another distribution holds is refused."""
        with self._lock:
            self._discovered = True
            for ep in _entry_points(again).select(group=self.group):
                if self._entry_points.get(ep.name) == ep.value:
                    continue  # found before (a second read of the same path)
                where = _where(ep, self.group)
                if ep.name in self._entries:
                    held = self._origin.get(ep.name, f"suite's own {self.kind}")
                    raise RegistryError(where, ep.name, f"a {self.kind} of that name is already registered ({held})",
                                        f"give the entry point in {_dist(ep)} another name")
                self._put(ep.name, ep, self.last)
                self._entry_points[ep.name] = ep.value
                self._origin[ep.name] = where

    def _ready(self) -> None:
        if not self._discovered:
            self.discover(again=False)

    # lookups --------------------------------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> T:
        self._ready()
        try:
            target = self._entries[name]
        except KeyError:
            close = difflib.get_close_matches(str(name), list(self._entries), n=3)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise UnknownName(f"the {self.kind} registry", str(name), f"no {self.kind} of that name",
                              f"{hint}one of: {', '.join(self._entries) or '(none)'}") from None
        if _is_ref(target):
            with self._lock:
                target = self._entries.get(name, target)
                if _is_ref(target):
                    target = self._load(name, target)
                    self._entries[name] = target
        return target

    def _load(self, name: str, ref: str | metadata.EntryPoint) -> T:
        where = self._origin.get(name) or f"the {self.kind} registry"
        try:
            obj = resolve(ref) if isinstance(ref, str) else ref.load()
        except Exception as exc:  # noqa: BLE001 -- any import-time failure of a plug-in: one line naming it
            shown = ref if isinstance(ref, str) else ref.value
            raise RegistryError(where, name, f"'{shown}' does not load: {type(exc).__name__}: {exc}",
                                "install what it imports, or correct the 'module:object' it names") from None
        self._check(name, obj, where)
        return obj

    def _check(self, name: str, obj: Any, where: str) -> None:
        if self.base is not None and not isinstance(obj, self.base):
            raise RegistryError(where, name, f"is {type(obj).__name__}, not a {self.kind} ({_names(self.base)})",
                                f"name an object of type {_names(self.base)}")
        own = self.name_of(obj) if self.name_of is not None else name
        if own != name:
            raise RegistryError(where, name, f"the {self.kind} it names calls itself {own!r}",
                                f"register it as {own!r}, or rename it {name!r}")

    def __contains__(self, name: object) -> bool:
        self._ready()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._ready()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._ready()
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        """The registered names in order, loading nothing."""
        return tuple(self)

    def origin(self, name: str) -> str | None:
        """Where an entry came from: its entry point (``GROUP: NAME = module:object (distribution)``), else None."""
        return self._origin.get(name)


def _is_ref(target: object) -> bool:
    """Whether an entry is still a reference to load: a 'module:object' string or an entry point. An entry point is
    known by its shape, not its class: a distribution found by another finder (the importlib_metadata backport, which
    a package such as MLflow's dependencies installs) yields the backport's EntryPoint, not importlib.metadata's."""
    return isinstance(target, str) or (callable(getattr(target, "load", None)) and hasattr(target, "value")
                                       and hasattr(target, "group"))


_read: list[metadata.EntryPoints] = []  # the process's one reading of every distribution's entry points


def _entry_points(again: bool) -> metadata.EntryPoints:
    """Every entry point on the path: read once for all five registries (a reading costs tens of ms)."""
    if again or not _read:
        _read[:] = [metadata.entry_points()]
    return _read[0]


def _where(ep: metadata.EntryPoint, group: str) -> str:
    return f"entry point [{group}] {ep.name} = {ep.value} ({_dist(ep)})"


def _dist(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"distribution {dist.name}" if dist is not None else "an unnamed distribution"


def _names(base: type | tuple[type, ...]) -> str:
    return " or ".join(b.__name__ for b in (base if isinstance(base, tuple) else (base,)))
