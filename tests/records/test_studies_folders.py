"""Every committed run folder under studies/ (a folder with plan.json or summary.json) is summarized again, in a copy
at another path, by this version's reader (older schema versions upgraded: suite.records.migrate), or is named here
with the one reason it cannot be, and that reason is what the reader says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from suite.analysis.derive import summarize
from suite.runtime.errors import SuiteError
from suite.records.evaluate import EvaluateResult

PLAN_ONLY = "not a run folder (no recipe.yaml)"  # a planned study (plan.json only), or a folder of notes beside runs
CANNOT = {  # folder (under studies/) -> the one reason it is not summarized, as the reader says it
    "2026-12-01-llama3-70b-shape-plan/results/plan-llama3-70b-shape": PLAN_ONLY,
    "2026-12-02-qwen-coder-study/results/plan-qwen2.5-coder-study": PLAN_ONLY,
    "2026-12-02-qwen-coder-study/results/h200-study-20261203/stretch3": PLAN_ONLY,
}


def run_folders() -> list[str]:
    studies = ROOT / "studies"
    return sorted({p.parent.relative_to(studies).as_posix() for p in studies.rglob("*")
                   if p.name in ("plan.json", "summary.json")})


def test_the_table_names_only_folders_that_exist():
    assert set(CANNOT) <= set(run_folders())
    assert len(run_folders()) > len(CANNOT)


@pytest.mark.parametrize("folder", run_folders())
def test_each_study_folder_is_summarized_or_names_its_reason(folder, tmp_path):
    copy = tmp_path / "copied" / Path(folder).name
    shutil.copytree(ROOT / "studies" / folder, copy, symlinks=True)
    if folder in CANNOT:
        with pytest.raises(SuiteError) as refused:
            summarize(copy)
        assert CANNOT[folder] in str(refused.value)
        return
    summary = summarize(copy)
    assert summary.run_dir == str(copy.resolve()) and summary.variants
    for v in summary.variants:  # every per-item file a result names is the copy's own, not the old machine's
        for ev in (e for e in [v.result(EvaluateResult), *v.engine_checks.values()] if e is not None):
            for f in ev.samples_files.values():
                assert Path(f).is_relative_to(copy.absolute()) or Path(f).is_relative_to(copy.resolve()), f
