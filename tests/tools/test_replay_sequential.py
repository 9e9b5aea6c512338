"""tools/replay_sequential.py on the project's recorded per-item scores: stopping early never contradicts the full
data's verdict, a decided full verdict is reached in every order, and the clear-cut cases stop early."""

from __future__ import annotations

import gzip
import math
import importlib.util
import sys

import pytest

from conftest import ROOT
from suite.runtime import sequential as seq

spec = importlib.util.spec_from_file_location("replay_sequential", ROOT / "tools" / "replay_sequential.py")
replay_sequential = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = replay_sequential  # its dataclasses look their module up there
spec.loader.exec_module(replay_sequential)

ORDERS = 10  # seeds 0-9 of the study's 200 (studies/2026-12-07-sequential-replay)
MARGINS = (0.01, 0.02)


@pytest.fixture(scope="module")
def rows():
    out = []
    for src in replay_sequential.SOURCES:
        for pair in replay_sequential.pairs_of(src):
            out += replay_sequential.replay(pair, MARGINS, ORDERS, looks=4)
    return out


def test_the_study_has_every_fp8_variant_and_task(rows):
    csv_rows = {(r.variant, r.task) for r in rows if r.source == "h200-qwen2.5-coder-0.5b"}
    assert csv_rows == {(v, t) for v in ("fp8-static", "fp8-dynamic", "fp8-static-kv")
                        for t in ("suite_ceval", "suite_gsm8k", "suite_humaneval", "suite_mmlu")}
    assert sum(r.source.startswith("2026") for r in rows) == 2 * 8  # the verdicts study's 8 FP8 evaluations


def test_stopping_never_contradicts_the_full_data(rows):
    for r in rows:
        where = f"{r.source} {r.variant} {r.task} margin {r.margin}: {r.stopped} against {r.full}"
        if r.full in (seq.PASS, seq.FAIL):
            assert r.agree == r.orders, where  # a decided full verdict: every order reaches it
        else:  # full data inconclusive: an early decision is on the side of the point estimate, never the other
            side = seq.PASS if r.delta > -r.margin else seq.FAIL
            assert set(r.stopped) <= {seq.INCONCLUSIVE, side}, where


def test_the_clear_cases_stop_early(rows):
    by = {(r.source, r.variant, r.task, r.margin): r for r in rows}
    src = "h200-qwen2.5-coder-0.5b"
    for m in MARGINS:  # static + FP8 KV's GSM8K failure (-10 points): decided within the first half of its items
        r = by[(src, "fp8-static-kv", "suite_gsm8k", m)]
        assert r.full == seq.FAIL and round(r.used_max * r.n) <= math.ceil(r.n / 2)  # by the 2nd of 4 looks
    for v in ("fp8-static", "fp8-dynamic", "fp8-static-kv"):  # MMLU's passes: on well under all of its items
        r = by[(src, v, "suite_mmlu", 0.02)]
        assert r.full == seq.PASS and r.used_mean <= 0.5 and r.used_max < 1


def test_a_source_that_is_not_an_items_table_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "items.csv.gz"
    bad.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert replay_sequential.main([str(bad), "--orders", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{bad}: ") and "(fix: " in err and len(err.splitlines()) == 1
