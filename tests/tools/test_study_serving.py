"""The study's scripts/study_serving.py on its H200 stretch 3 (studies/2026-12-02-qwen-coder-study/: results/
h200-study-20261203/stretch3): the serving half of a run without a summary, through the summary's own code, with each point's label as run and under the current rule."""

from __future__ import annotations

import importlib.util
import json
import shutil

from conftest import ROOT

HOME = ROOT / "studies/2026-12-02-qwen-coder-study"
spec = importlib.util.spec_from_file_location("study_serving", HOME / "scripts/study_serving.py")
study_serving = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study_serving)

STUDY = HOME / "results/h200-study-20261203"


def test_stretch3_figures_costs_and_relabelled_points(tmp_path, capsys):
    run = tmp_path / "run"
    for v in ("bf16", "fp8-static", "fp8-static-keep-ends", "fp8-dynamic"):  # fp8-dynamic-kv's did not run
        (run / "variants" / v).mkdir(parents=True)
        shutil.copy(STUDY / "stretch3" / f"{v}.benchmark.result.json", run / "variants" / v / "benchmark.result.json")
    shutil.copy(STUDY / "recipe.yaml", run / "recipe.yaml")
    assert study_serving.main([str(run), "--json", str(tmp_path / "s.json")]) == 0
    printed = capsys.readouterr()
    assert "fp8-dynamic-kv: no benchmark result (not run)" in printed.out
    assert "| fp8-static | 16,769 (0.885) | 256 (17,973), steadiness not checked |" in printed.out
    out = json.loads((tmp_path / "s.json").read_text())
    m = out["metrics"]
    assert round(m["bf16"]["tput.output_tok_s"]) == 18940 and round(m["fp8-dynamic"]["tput.output_tok_s.ratio"], 3) == 0.986
    assert round(m["bf16"]["cost.per_1m_output_tokens"], 4) == 0.0666  # USD 4.54 / (18,940 x 3,600) x 1e6
    assert {(p["bottleneck_as_run"], p["bottleneck_now"]) for rows in out["points"].values() for p in rows} == {
        ("seq-cap", "engine-cpu")}
    assert len(out["warnings"]) == 4 and all("was not checked" in w for w in out["warnings"])
