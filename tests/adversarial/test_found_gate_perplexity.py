"""Found by the adversarial review: ``max_perplexity_increase`` is recomputed with the tokenizer.json found at the
baseline's ``model_path`` as summary.json records it (``gates.recompute._perplexity`` -> ``perplexity.token_counter``).
Nothing compares that path with plan.json's, so a run folder writer adds a tokenizer of their own (here a
character-level one, inside the run folder) and points the summary at it: every document's token count grows, the
token perplexities shrink towards 1, and a failing rise (+0.35, CI high +0.43 against 0.2) passes (CI high +0.006),
with the samples files and their hashes untouched. The tokenizer is a verdict input that lives outside the run folder
and outside the signed manifest."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "analysis"))
from test_perplexity_gate import DOCS, model_dir, run_gate, run_with  # noqa: E402,F401 - model_dir: a fixture

from suite import cli  # noqa: E402
from suite.analysis.summary import perplexity_comparisons  # noqa: E402
from suite.records.summary import RunSummary  # noqa: E402
from suite.records.evaluate import EvaluateResult

FAILING = [0.3, 0.4, 0.25, 0.5, 0.35, 0.3]  # per-document token-perplexity rises: CI high above 0.2


def char_tokenizer(folder):
    """A tokenizer.json that makes one token of every character of the long-text corpus."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for d in DOCS:
        for ch in d["text"]:
            vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_baseline_tokenizer_swapped_through_the_summary_is_refused(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, FAILING, gates={"max_perplexity_increase": 0.2})
    assert run_gate(tmp_path, capsys, s)[0] == 1  # honest: fails, CI high +0.43
    run = tmp_path / "run"
    data = json.loads((run / "summary.json").read_text())
    data["variants"][0]["model_path"] = str(char_tokenizer(run / "variants" / "bf16" / "tokenizer"))
    summary = RunSummary.model_validate(data)
    for v in summary.variants:
        v.perplexity = []
    assert perplexity_comparisons(summary.variants)[1] == []  # the figures recomputed as the summary would have them
    (run / "summary.json").write_text(json.dumps(summary.model_dump(mode="json")))
    code = cli.main(["gate", str(run), "--no-record"])
    out, err = capsys.readouterr()
    # expected: a model_path other than the plan's is bad input (2), or the rise still fails (1)
    assert code in (1, 2), out + err


SMALL = [0.02, 0.05, -0.03, 0.04, 0.01, 0.03, 0.0, 0.02]  # a small rise: passes 0.2


def test_perplexity_gate_needs_nothing_outside_the_run_folder(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2})
    assert run_gate(tmp_path, capsys, s)[0] == 0
    model_dir.rename(tmp_path / "model-not-on-the-gate-machine")
    code = cli.main(["gate", str(tmp_path / "run"), "--no-record"])
    out, err = capsys.readouterr()
    assert code == 0, out + err


def test_perplexity_without_the_variants_records_is_inconclusive_not_judged(tmp_path, model_dir, capsys):
    import hashlib
    from pathlib import Path

    s = run_with(tmp_path, model_dir, FAILING, gates={"max_perplexity_increase": 0.2})
    for v in s.variants:  # a run made since per-item hashes are recorded
        v.result(EvaluateResult).samples_sha256 = {t: hashlib.sha256(Path(f).read_bytes()).hexdigest()
                                     for t, f in v.result(EvaluateResult).samples_files.items()}
    assert run_gate(tmp_path, capsys, s)[0] == 1
    run = tmp_path / "run"
    data = json.loads((run / "summary.json").read_text())
    fp8 = data["variants"][1]
    res = run / "variants" / "fp8" / "evaluate.result.json"
    staged = json.loads(res.read_text())
    staged["samples_files"], staged["samples_sha256"] = {}, {}  # the variant's per-item records no longer named
    res.write_text(json.dumps(staged))
    fp8["stages"]["evaluate"]["samples_files"], fp8["stages"]["evaluate"]["samples_sha256"] = {}, {}
    rec = fp8["perplexity"][0]
    rec.update(delta=0.01, ci_low=0.0, ci_high=0.02, ppl=rec["baseline_ppl"] + 0.01)
    fp8["metrics"].update({"ppl.suite_longppl": rec["ppl"], "ppl.suite_longppl.delta": 0.01,
                           "ppl.suite_longppl.delta_ci_low": 0.0, "ppl.suite_longppl.delta_ci_high": 0.02})
    (run / "summary.json").write_text(json.dumps(data))
    code = cli.main(["gate", str(run), "--no-record"])
    out, err = capsys.readouterr()
    assert code in (2, 3), out + err  # as for accuracy: no per-item records, no pass
