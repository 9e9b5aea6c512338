"""tools/house_metrics.py counts how big the package is honestly: function-local imports of suite.* (with the comment
that says why, or none), re-export shims (a name imported only for others, an ``x = module.x`` alias), and not a
module imported to register what it holds, nor a package's declared interface."""

from __future__ import annotations

import importlib.util
import textwrap

from conftest import ROOT

spec = importlib.util.spec_from_file_location("house_metrics", ROOT / "tools" / "house_metrics.py")
hm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hm)

FILES = {
    "suite/__init__.py": '"""The package."""\n',
    "suite/low.py": '''
        """A module below."""
        from suite import top

        VALUE = 1
        def used():
            return top.NAME
    ''',
    "suite/top.py": '''
        """A module above: a shim, an alias, a used import and two local imports."""
        from suite.low import VALUE, used  # noqa: F401  (re-exported)
        from suite import low
        alias = low.used

        NAME = "top"

        def f():
            from suite.low import used as again  # lazy: low imports this module at its top
            return again() + used()

        def g():
            from suite import low as again
            return again
    ''',
    "suite/pkg/__init__.py": '''
        """A package that registers its modules and declares an interface."""
        from suite.pkg import plugin  # noqa: F401 -- importing it registers it
        from suite.low import VALUE
        __all__ = ["VALUE"]
    ''',
    "suite/pkg/plugin.py": '"""A module of the package."""\n',
}


def tree(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_local_imports_with_their_reason_and_whether_they_lead_back(tmp_path):
    found = {i["at"]: i for i in hm.local_imports(tree(tmp_path))}
    assert set(found) == {"suite/top.py:10", "suite/top.py:14"}
    assert found["suite/top.py:10"]["why"] == "lazy: low imports this module at its top"
    assert found["suite/top.py:10"]["circular"] and found["suite/top.py:14"]["why"] is None


def test_shims_are_names_imported_only_for_others_and_aliases(tmp_path):
    root = tree(tmp_path)
    assert hm.reexport_shims(root) == ["suite/top.py:3 VALUE", "suite/top.py:5 alias = low.used"]
    assert hm.package_interfaces(root) == ["suite/pkg/__init__.py (2 names)"]
    assert hm.suite_lines(root) == sum(len(t.splitlines()) for t in (textwrap.dedent(x) for x in FILES.values()))
