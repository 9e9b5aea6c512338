"""Where the suite's data folders are: the lm-eval tasks (``tasks/``) and the calibration sets (``calibration/``).

An installed wheel carries them as package data, ``suite/_data/tasks`` and ``suite/_data/calibration``
(setup.py maps the repository's top-level folders there), found through ``importlib.resources``. A source
checkout (an editable install, or ``PYTHONPATH`` on the checkout) keeps them at the repository's top level,
where the project's layout has them: that folder is used when the package holds none.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = ("tasks", "calibration")


def folder(name: str) -> Path:
    """The data folder ``name`` ("tasks" or "calibration"): the package's own, else the checkout's."""
    if name not in FOLDERS:
        raise ValueError(f"unknown data folder {name!r} (one of {', '.join(FOLDERS)})")
    packaged = resources.files(__name__) / name
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / name
