"""The one registry shape (suite.records.registry): lazy 'module:object' entries loaded on first use, registration by
call or decorator, order with `before` and a pinned last entry, and one-line errors that name the fix."""

from __future__ import annotations

import sys

import pytest

from suite.records.registry import STAGE_GROUP, Registry, RegistryError, UnknownName, of_group, resolve


def fresh(**kw) -> Registry:
    return Registry("widget", "suite.test-widgets-none", **kw)  # a group no distribution provides


def test_a_lazy_entry_is_imported_on_first_use_only():
    reg = fresh()
    sys.modules.pop("colorsys", None)
    reg.register("hls", "colorsys:rgb_to_hls")
    assert "hls" in reg and "colorsys" not in sys.modules  # listed, not imported
    assert reg["hls"](1.0, 0.0, 0.0) == (0.0, 0.5, 1.0) and "colorsys" in sys.modules
    reg.register("mod", "colorsys")  # a module alone: the module
    assert reg["mod"] is sys.modules["colorsys"]


def test_by_decorator_or_call_in_order_replacing_in_place_with_before_and_last():
    reg = fresh(last="z")
    reg.register("z", 26)
    reg.register("a")(1)

    @reg.register("f")
    def f():
        return "f"

    assert list(reg) == ["a", "f", "z"] and reg["f"] is f  # new entries go before the pinned last one
    reg.register("b", 2, before="f")
    reg.register("a", 10)  # replaced where it stood
    assert list(reg.items()) == [("a", 10), ("b", 2), ("f", f), ("z", 26)]
    reg.unregister("b")
    assert reg.names() == ("a", "f", "z") and len(reg) == 3 and reg.get("b") is None


def test_an_unknown_name_says_which_are_close():
    reg = fresh()
    reg.register("evaluate", 1)
    with pytest.raises(UnknownName) as e:
        reg["evalute"]
    assert str(e.value) == ("the widget registry: evalute: no widget of that name (fix: did you mean 'evaluate'? "
                            "one of: evaluate)")
    assert isinstance(e.value, KeyError)


def test_wrong_kinds_and_names_are_refused_when_they_load():
    reg = fresh(base=int, name_of=lambda n: f"n{n}")
    reg.register("n3", 3)
    with pytest.raises(RegistryError, match=r"the widget registry: n4: is float, not a widget \(int\)"):
        reg.register("n4", 4.0)  # an object is checked at once
    with pytest.raises(RegistryError, match="the widget it names calls itself 'n5'"):
        reg.register("n6", 5)
    reg.register("pi", "math:pi")
    with pytest.raises(RegistryError, match="the widget registry: pi: is float, not a widget"):
        reg["pi"]
    reg.register("gone", "suite.records.no_such_module:x")
    with pytest.raises(RegistryError, match="'suite.records.no_such_module:x' does not load: ModuleNotFoundError"):
        reg["gone"]


def test_resolve_follows_dotted_attributes():
    assert resolve("os.path:join.__name__") == "join"


def test_a_registry_is_found_by_its_group_from_a_floor_below_it():
    """The summary's records type each stage result through the stage registry, which they cannot import."""
    from suite.stages.registry import STAGES

    assert of_group(STAGE_GROUP) is STAGES and of_group(fresh().group).kind == "widget"
    with pytest.raises(RegistryError, match=r"^the registries: suite.no-such-group: no registry of that group is "
                                            r"loaded in this process \(fix: import the module that makes it"):
        of_group("suite.no-such-group")
