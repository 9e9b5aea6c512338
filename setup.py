"""setuptools' package list (everything else is in pyproject.toml): the ``suite`` packages, and the repository's
top-level ``tasks/`` and ``calibration/`` folders carried in the wheel as ``suite/_data/tasks`` and
``suite/_data/calibration`` (package data, found by ``suite._data.folder``); ``tools/`` and ``tests/`` stay out."""

from setuptools import find_packages, setup

DATA = {"suite._data.tasks": "tasks", "suite._data.calibration": "calibration"}

setup(
    packages=find_packages(include=["suite", "suite.*"]) + list(DATA),
    package_dir=DATA,
    package_data={
        "suite.outputs": ["templates/*.j2", "templates/*.css"],
        **{pkg: ["**/*.yaml", "**/*.py", "**/*.md", "**/*.json", "**/*.jsonl", "**/*.jsonl.gz", "**/*.csv"]
           for pkg in DATA},
    },
    exclude_package_data={pkg: ["**/__pycache__/*", "**/*.pyc"] for pkg in DATA},
)
