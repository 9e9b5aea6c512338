"""Paired per-document perplexity (suite.analysis.perplexity) from lm-eval-shaped samples files, and the
``max_perplexity_increase`` gate on it: pass, fail, point estimate vs CI, refusals, tampered summaries.

The samples rows are made the way lm-eval 0.4.13 writes them for the suite's tasks: the sample dict of
``lm_eval.evaluator`` (doc, target, resps, filtered_resps, filter, metrics) updated with the task's own
``process_results`` output from ``tasks/suite_longppl/utils.py`` (the metric pairs), on real documents of
``tasks/data/longtext``. Token counts come from a word-level tokenizer.json built here (its count is
checked against a regex), and, where the Qwen2.5 model is present, from the real tokenizer against the
H200 run's numbers in studies/2026-12-01-fp8-kv-cache/results/h200-kv-proof-20261201/perplexity.txt.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import re

import pytest

from conftest import ROOT, STALE, edit_record, make_summary, plan_run, write_run_recipe
from test_gate_tamper import _both  # several tamperings of one summary at once
from suite import cli
from suite.analysis import gate, perplexity
from suite.analysis.paired import bootstrap_ci
from suite.records.summary import VariantSummary
from suite.analysis.assemble import with_comparisons, with_metrics
from suite.analysis.summary import delta_metrics, paired_comparisons, perplexity_comparisons, variant_metrics
from suite.recipe import GateSpec, Recipe
from suite.records.evaluate import EvaluateResult, TaskScore
from suite.runtime import tokenizer
from suite.stages.registry import EVALUATE

TASK = "suite_longppl"
DOCS = [json.loads(line) for line in (ROOT / "tasks/data/longtext/docs.jsonl").read_text().splitlines()]
H200 = ROOT / "studies/2026-12-01-fp8-kv-cache/results/h200-kv-proof-20261201"
SCRIPTS = ROOT / "studies/2026-12-01-fp8-kv-cache/scripts"
QWEN = ROOT / "models/qwen2.5-coder-0.5b-instruct"
_spec = importlib.util.spec_from_file_location("longppl_utils", ROOT / "tasks/suite_longppl/utils.py")
utils = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(utils)


def words(text):  # what the word-level tokenizer below counts (its Whitespace pre-tokenizer's pieces)
    return len(re.findall(r"\w+|[^\w\s]+", text))


@pytest.fixture
def model_dir(tmp_path):
    """A model folder holding only a tokenizer.json: a word-level tokenizer over the long-text corpus."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for d in DOCS:
        for w in re.findall(r"\w+|[^\w\s]+", d["text"]):
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "model").mkdir()
    tok.save(str(tmp_path / "model" / "tokenizer.json"))
    return tmp_path / "model"


def rolling_row(i, doc, ll, task=TASK):
    """One line of samples_suite_longppl.jsonl as the evaluate stage writes it ({"task": ..., **sample})."""
    return {"task": task, "doc_id": i, "doc": doc, "target": doc["text"], "arguments": [[doc["text"], None]],
            "resps": [[ll]], "filtered_resps": [ll], "filter": "none",
            "metrics": ["word_perplexity", "byte_perplexity", "bits_per_byte"], "doc_hash": "h", "prompt_hash": "p",
            "target_hash": "t", **{k: list(v) for k, v in utils.process_results(doc, [ll]).items()}}


def write_samples(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def evaluation(tmp_path, name, lls: dict[int, float], tokens_of, docs=DOCS, acc=None):
    """An EvaluateResult with a suite_longppl samples file (documents ``lls``' keys) and its lm-eval score
    (word perplexity, as the task's weighted_perplexity aggregates it), plus suite_gsm8k when ``acc`` is given."""
    rows = [rolling_row(i, docs[i], ll) for i, ll in lls.items()]
    f = write_samples(tmp_path / f"samples_{TASK}_{name}.jsonl", rows)
    word_ppl = math.exp(-sum(r["word_perplexity"][0] for r in rows) / sum(r["word_perplexity"][1] for r in rows))
    scores = [TaskScore(task=TASK, metric="word_perplexity,none", value=word_ppl, n=len(rows),
                        all_metrics={"word_perplexity,none": word_ppl})]
    files = {TASK: f}
    if acc is not None:
        g = tmp_path / f"samples_suite_gsm8k_{name}.jsonl"
        files["suite_gsm8k"] = write_samples(g, [{"task": "suite_gsm8k", "doc_id": i, "filter": "strict-match",
                                                  "exact_match": float(x)} for i, x in enumerate(acc)])
        scores.insert(0, TaskScore(task="suite_gsm8k", metric="exact_match,strict-match", value=sum(acc) / len(acc),
                                   n=len(acc)))
    return EvaluateResult(scores=scores, results_file="r.json", samples_files=files, wall_s=1, engine_load_s=1)


def base_lls(n):
    """Baseline log-likelihoods: token perplexity ~30 on the word-level tokenizer's count."""
    return {i: -math.log(30.0 + i) * words(DOCS[i]["text"]) for i in range(n)}


def shifted(lls, ppl_delta):
    """Log-likelihoods whose per-document token perplexity is the baseline's plus ``ppl_delta[i]``."""
    return {i: -math.log(math.exp(-ll / words(DOCS[i]["text"])) + ppl_delta[i]) * words(DOCS[i]["text"])
            for i, ll in lls.items()}


def built(tmp_path, model_dir, base_ev, var_ev, gates=None, tasks=(TASK,)):
    """A summary made as `suite run` makes one (variant_metrics, deltas, paired, perplexity)."""
    s = make_summary({"bf16": {}, "fp8": {}}, tasks=tasks, gates=gates, run_dir=str(tmp_path / "run"))
    s.recipe = Recipe.model_validate(s.recipe).model_dump(mode="json")
    vdir = tmp_path / "run" / "variants" / "bf16"  # the baseline's tokenizer kept as its evaluate stage keeps it
    vdir.mkdir(parents=True, exist_ok=True)
    kept, sha = tokenizer.keep(str(model_dir), [sc.metric for sc in base_ev.scores], vdir)
    base_ev = base_ev.model_copy(update={"tokenizer_file": kept, "tokenizer_sha256": sha})
    s.variants = [VariantSummary(name="bf16", is_baseline=True, model_path=str(model_dir), stages={EVALUATE: base_ev}),
                  VariantSummary(name="fp8", is_baseline=False, model_path="/elsewhere", stages={EVALUATE: var_ev})]
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    s.variants = with_metrics(s.variants, delta_metrics(s.variants))
    s.variants = with_comparisons(s.variants, paired_comparisons(s.variants), "paired", keep=True)
    found, said = perplexity_comparisons(s.variants)
    s.variants = with_comparisons(s.variants, found, "perplexity")
    s.warnings += said
    return s


def run_gate(tmp_path, capsys, s, policy: str | None = None):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    s = write_run_recipe(run, s if isinstance(s, dict) else s.model_dump(mode="json"))
    (run / "summary.json").write_text(json.dumps(plan_run(run, s)))  # plan.json and stage results, as run leaves them
    argv = ["gate", str(run), "--no-record"]
    if policy is not None:
        (tmp_path / "policy.yaml").write_text(policy)
        argv += ["--policy", str(tmp_path / "policy.yaml")]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the paired delta in the summary


def test_word_level_tokenizer_counts_what_the_regex_counts(model_dir):
    count = perplexity.token_counter(str(model_dir))
    assert count([d["text"] for d in DOCS[:3]]) == [words(d["text"]) for d in DOCS[:3]]
    assert perplexity.token_counter(str(model_dir.parent / "nothing-here")) is None


def test_paired_perplexity_delta_per_document(tmp_path, model_dir):
    deltas = [0.5, 0.1, -0.2, 0.3, 0.9, 0.0]
    b = base_lls(6)
    s = built(tmp_path, model_dir, evaluation(tmp_path, "b", b, words, acc=[1, 0, 1, 1]),
              evaluation(tmp_path, "v", shifted(b, deltas), words, acc=[1, 1, 0, 1]), tasks=("suite_gsm8k", TASK))
    base, v = s.variants
    (rec,) = v.perplexity
    assert rec["task"] == TASK and rec["unit"] == "document" and rec["n"] == 6 and rec["unpaired"] == 0
    assert rec["delta"] == pytest.approx(sum(deltas) / 6, abs=1e-9)
    # the oracle: per document exp(-ll / tokens), the regex's token count (a bootstrap over 6 values is discrete:
    # the same arithmetic as the module's, or BCa's ties at the mean move the bounds)
    diffs = [math.exp(-ll / words(DOCS[i]["text"])) - math.exp(-b[i] / words(DOCS[i]["text"]))
             for i, ll in shifted(b, deltas).items()]
    assert diffs == pytest.approx(deltas, abs=1e-9)
    low, high, method = bootstrap_ci([d for _, d in sorted(zip((DOCS[i]["id"] for i in range(6)), diffs))])  # by id
    assert (rec["ci_low"], rec["ci_high"], rec["ci_method"]) == (pytest.approx(low), pytest.approx(high), method)
    assert rec["worse"] == 4 and rec["tokens"] == sum(words(DOCS[i]["text"]) for i in range(6))
    # corpus perplexity: exp(-sum ll / sum tokens), the baseline's over every document it scored
    corpus = math.exp(-sum(b.values()) / rec["tokens"])
    assert rec["baseline_ppl"] == pytest.approx(corpus) and base.metrics["ppl.suite_longppl"] == pytest.approx(corpus)
    assert 30 < corpus < 36 and rec["ppl"] > rec["baseline_ppl"]
    m = v.metrics
    assert m["ppl.suite_longppl"] == rec["ppl"] and m["ppl.suite_longppl.delta"] == rec["delta"]
    assert (m["ppl.suite_longppl.delta_ci_low"], m["ppl.suite_longppl.delta_ci_high"]) == (rec["ci_low"], rec["ci_high"])
    assert m["ppl.suite_longppl.docs_paired"] == 6 and m["ppl.suite_longppl.docs_unpaired"] == 0
    assert m["ppl.suite_longppl.docs_worse"] == 4
    # perplexity is lower-is-better: not in the accuracy mean, not paired as an accuracy (a TypeError before)
    assert m["acc.mean"] == m["acc.suite_gsm8k"] == 0.75 and [p["task"] for p in v.paired] == ["suite_gsm8k"]
    assert not s.warnings


def test_documents_that_do_not_pair_are_a_loud_warning(tmp_path, model_dir):
    b = base_lls(6)
    var = dict(shifted(b, [0.1] * 6))
    del var[5]  # missing in the variant
    docs = [dict(d) for d in DOCS]
    docs[2]["text"] = docs[2]["text"][:-10]  # scored on other text under the same id
    rows = [rolling_row(i, docs[i], ll) for i, ll in var.items()] + [rolling_row(3, docs[3], var[3])]  # doc 3 twice
    ev = evaluation(tmp_path, "v", var, words)
    write_samples(tmp_path / f"samples_{TASK}_v.jsonl", rows + [rolling_row(6, DOCS[6], -1000.0)])  # and an extra
    s = built(tmp_path, model_dir, evaluation(tmp_path, "b", b, words), ev)
    (rec,) = s.variants[1].perplexity
    assert rec["n"] == 3 and rec["unpaired"] == 4, rec  # docs 0, 1 and 4 pair; 2, 3, 5, 6 do not
    ids = [f"{TASK}/{DOCS[i]['id']}" for i in range(7)]
    assert rec["unpaired_ids"] == [f"{ids[3]} (scored twice)", f"{ids[2]} (different text)",
                                   f"{ids[5]} (baseline only)", f"{ids[6]} (variant only)"]
    (warning,) = [w for w in s.warnings if "not paired" in w]
    assert warning.startswith("fp8: suite_longppl: 4 document(s) not paired with bf16's") and "scored twice" in warning
    assert s.variants[1].metrics["ppl.suite_longppl.docs_unpaired"] == 4


def test_no_tokenizer_is_a_warning_and_no_delta(tmp_path, model_dir):
    b = base_lls(3)
    s = built(tmp_path, tmp_path / "no-model", evaluation(tmp_path, "b", b, words),
              evaluation(tmp_path, "v", shifted(b, [0.1] * 3), words))
    assert s.variants[1].perplexity == [] and "ppl.suite_longppl.delta" not in s.variants[1].metrics
    assert any("no readable tokenizer.json" in w and "max_perplexity_increase" in w for w in s.warnings)


def test_a_broken_samples_file_is_a_warning_not_a_crash(tmp_path, model_dir):
    b = base_lls(3)
    var = evaluation(tmp_path, "v", shifted(b, [0.1] * 3), words)
    var.samples_files[TASK] = str(tmp_path / "gone.jsonl")
    s = built(tmp_path, model_dir, evaluation(tmp_path, "b", b, words), var)
    assert s.variants[1].perplexity == [] and any("cannot be read" in w for w in s.warnings)


@pytest.mark.skipif(not (QWEN / "tokenizer.json").is_file(), reason="no Qwen2.5 tokenizer in models/")
def test_h200_run_reproduced_from_lm_eval_shaped_samples(tmp_path):
    """The H200 session's log-likelihoods (studies/2026-12-01-fp8-kv-cache/results/h200-kv-proof-20261201/*.ppl.jsonl.gz) written back as
    lm-eval samples of both tasks and paired by the suite with Qwen2.5's tokenizer.json: the numbers
    studies/2026-12-01-fp8-kv-cache/scripts/ppl_paired.py printed there with transformers' tokenizer (perplexity.txt)."""
    def rows(name):
        with gzip.open(H200 / f"{name}.ppl.jsonl.gz", "rt") as fh:
            return {(r["task"], r["id"]): r["ll"] for r in map(json.loads, fh)}

    def samples(name):
        lls, out = rows(name), {}
        roll = [rolling_row(i, d, lls[(TASK, d["id"])]) for i, d in enumerate(DOCS)]
        pos, i = [], 0
        for d in DOCS:
            for sp in utils.spans(d["text"]):
                doc = {"id": f"{d['id']}@{sp['bucket']}", "doc_id": d["id"], **sp, "context": d["text"][:sp["start_char"]],
                       "continuation": d["text"][sp["start_char"]:sp["end_char"]]}
                ll = lls[("suite_longppl_pos", doc["id"])]
                res = [(ll, False)] if not doc["context"] else [(ll - 100.0, False), (-100.0, False)]
                pos.append({"task": "suite_longppl_pos", "doc_id": i, "doc": doc, "target": 0, "filter": "none",
                            "resps": [[r] for r in res], **utils.process_span_results(doc, res)})
                i += 1
        for task, rs in ((TASK, roll), ("suite_longppl_pos", pos)):
            out[task] = write_samples(tmp_path / f"{name}.{task}.jsonl", json.loads(json.dumps(rs)))
        scores = [TaskScore(task=t, metric="word_perplexity,none", value=1.0, n=len(r)) for t, r in
                  ((TASK, roll), ("suite_longppl_pos", pos))]
        return EvaluateResult(scores=scores, results_file="r", samples_files=out, wall_s=1, engine_load_s=1)

    count = perplexity.token_counter(str(QWEN))
    got = {c.task: c for c in perplexity.compare_variant(samples("bf16"), samples("cal-skip0-triton"), count)}
    roll, pos = got[TASK], got["suite_longppl_pos"]
    # perplexity.txt: "cal-skip0-triton   token ppl 54.7445 (delta +1.2003, +2.24%); per-document delta mean
    # +0.9394 [+0.7448, +1.1191], worse in 28/30" and, for the spans, 51.4399, +1.3822 [+1.2225, +1.5296], 163/174
    assert (roll.n, roll.unpaired, roll.tokens, roll.worse) == (30, 0, 351_716, 28)
    assert f"{roll.baseline_ppl:.4f} {roll.ppl:.4f} {roll.delta:+.4f} [{roll.ci_low:+.4f}, {roll.ci_high:+.4f}]" == \
        "53.5441 54.7445 +0.9394 [+0.7448, +1.1191]"
    assert (pos.unit, pos.n, pos.unpaired, pos.worse) == ("span", 174, 0, 163)
    assert f"{pos.ppl:.4f} {pos.delta:+.4f} [{pos.ci_low:+.4f}, {pos.ci_high:+.4f}]" == "51.4399 +1.3822 [+1.2225, +1.5296]"


def test_ppl_paired_script_uses_the_suite_and_reproduces_its_published_output():
    import subprocess
    import sys

    names = ["bf16", "unit-fa3", "unit-triton", "cal-fa3", "cal-skip0-triton"]
    res = subprocess.run([sys.executable, str(SCRIPTS / "ppl_paired.py"),
                          *[str(H200 / f"{n}.ppl.jsonl.gz") for n in names]], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout == (H200 / "perplexity.txt").read_text()
    assert "suite.analysis.perplexity import compare" in (SCRIPTS / "ppl_paired.py").read_text()


# ---------------------------------------------------------------- the gate


def run_with(tmp_path, model_dir, deltas, gates=None, tasks=(TASK,)):
    b = base_lls(len(deltas))
    return built(tmp_path, model_dir, evaluation(tmp_path, "b", b, words), evaluation(tmp_path, "v", shifted(b, deltas),
                                                                                       words), gates=gates, tasks=tasks)


SMALL = [0.02, 0.05, -0.03, 0.04, 0.01, 0.03, 0.0, 0.02]  # mean 0.0175, CI well under 0.2
NOISY = [0.9, -0.8, 0.7, -0.6, 0.5, -0.5, 0.8, -0.7]      # mean 0.0375: the point estimate is under 0.2, the CI is not


def test_gate_passes_a_small_rise_and_names_task_delta_ci_threshold(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2})
    (c,) = gate.run(gate.GateConfig(s, GateSpec(max_perplexity_increase=0.2))).checks
    rec = s.variants[1].perplexity[0]
    assert c.passed and c.gate == "max perplexity increase suite_longppl (CI high of delta)" and c.n == 8
    assert c.measured == rec["ci_high"] and c.threshold == 0.2 and c.upper
    assert f"delta {rec['delta']:+.4f} [95% CI {rec['ci_low']:+.4f}, {rec['ci_high']:+.4f}] over 8 documents" in c.detail
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out and "max perplexity increase suite_longppl" in out, out + err


def test_gate_fails_a_rise_and_says_by_how_much(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, [0.3, 0.4, 0.25, 0.5, 0.35, 0.3], gates={"max_perplexity_increase": 0.2})
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 1 and "gate: FAIL" in out, out + err
    line = next(ln for ln in out.splitlines() if ln.startswith("FAILED fp8: max perplexity increase suite_longppl"))
    assert "token-perplexity delta +0.35" in line and "[95% CI +" in line and "above 0.2" in line


def test_the_ci_not_the_point_estimate_is_gated(tmp_path, model_dir):
    s = run_with(tmp_path, model_dir, NOISY)
    rec = s.variants[1].perplexity[0]
    assert rec["delta"] < 0.2 < rec["ci_high"]
    (c,) = gate.run(gate.GateConfig(s, GateSpec(max_perplexity_increase=0.2))).checks
    assert not c.passed and c.measured == rec["ci_high"]
    assert gate.run(gate.GateConfig(s, GateSpec(max_perplexity_increase=rec["ci_high"]))).checks[0].passed  # at it


def test_a_run_without_a_perplexity_task_is_refused(tmp_path, capsys):
    s = make_summary({"bf16": {"acc.suite_gsm8k": 0.5}, "fp8": {"acc.suite_gsm8k": 0.5}}, tasks=("suite_gsm8k",),
                     run_dir=str(tmp_path / "run"))
    out = gate.run(gate.GateConfig(s, GateSpec(max_perplexity_increase=0.2)))
    assert not out.passed and any("evaluated no perplexity task" in p.message for p in out.problems)
    code, _, err = run_gate(tmp_path, capsys, s, "max_perplexity_increase: 0.2\n")
    assert code == 2 and "max_perplexity_increase" in err and "(fix: " in err


def test_accuracy_gates_skip_perplexity_tasks_and_may_not_name_them(tmp_path, model_dir, capsys):
    # a 3-point rise read as an accuracy "drop" is -3: default_max_drop passed it before
    s = run_with(tmp_path, model_dir, [3.0] * 4, tasks=(TASK,))
    out = gate.run(gate.GateConfig(s, GateSpec(default_max_drop=0.01, default_non_inferiority_margin=0.01)))
    assert not out.problems and out.checks == []
    code, _, err = run_gate(tmp_path, capsys, s, "max_drop: {suite_longppl: 0.2}\n")
    assert code == 2 and "max_drop.suite_longppl" in err and "perplexity task" in err


def test_schema_and_policy_diff():
    from pydantic import ValidationError

    for bad in (-0.1, math.inf, math.nan, "lots"):
        with pytest.raises(ValidationError):
            GateSpec(max_perplexity_increase=bad)
    assert gate.weaker_than(GateSpec(max_perplexity_increase=0.5), GateSpec(max_perplexity_increase=0.2)) == [
        "max_perplexity_increase: 0.2 -> 0.5"]
    assert gate.weaker_than(GateSpec(), GateSpec(max_perplexity_increase=0.2)) == ["max_perplexity_increase: 0.2 -> (none)"]


def _fp8(s):
    return s["variants"][1]


def _metric(key, value):
    def change(s):
        if value is None:
            del _fp8(s)["metrics"][key]
        else:
            _fp8(s)["metrics"][key] = value
    return change


def _record(field, value):
    def change(s):
        _fp8(s)["perplexity"][0][field] = value
    return change


K = "ppl.suite_longppl"
TAMPERS = [  # (id, change to summary.json): each once refused; now summary.json is a cache, never read for a verdict
    ("ci-high-edited", _metric(K + ".delta_ci_high", 0.01)),
    ("ci-high-and-record-edited", _both(_metric(K + ".delta_ci_high", -1.0), _record("ci_high", -1.0))),
    ("ci-high-missing", _metric(K + ".delta_ci_high", None)),
    ("ci-high-nan", _metric(K + ".delta_ci_high", math.nan)),
    ("delta-edited", _metric(K + ".delta", -0.5)),
    ("variant-ppl-edited", _metric(K, 1.0)),
    ("baseline-ppl-edited", lambda s: s["variants"][0]["metrics"].update({K: 1.0})),
    ("record-removed", lambda s: _fp8(s).update(perplexity=[])),
    ("record-doubled", lambda s: _fp8(s)["perplexity"].append(dict(_fp8(s)["perplexity"][0]))),
    ("docs-paired-missing", _metric(K + ".docs_paired", None)),
    ("docs-paired-disagrees", _metric(K + ".docs_paired", 3.0)),
    ("one-doc-paired", _both(_metric(K + ".docs_paired", 1.0), _record("n", 1))),
    ("docs-paired-fraction", _metric(K + ".docs_paired", 2.5)),
    ("docs-unpaired-missing", _metric(K + ".docs_unpaired", None)),
    ("docs-unpaired-in-record", _record("unpaired", 2)),
]


@pytest.mark.parametrize("name, change", TAMPERS, ids=[t[0] for t in TAMPERS])
def test_a_tampered_perplexity_summary_json_changes_nothing_but_a_warning(tmp_path, model_dir, capsys, name, change):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2}).model_dump(mode="json")
    assert run_gate(tmp_path, capsys, s)[0] == 0
    change(s)
    code, out, err = run_gate(tmp_path, capsys, s)  # the stage results stay as the run wrote them
    assert code == 0 and "gate: PASS" in out and STALE in err, f"{name}: exit {code}\n{out}{err}"


def _score(variant: str, **fields):
    def change(run):
        edit_record(run, variant, "evaluate.result.json", lambda d: d["scores"][0].update(fields))
    return change


RECORD_TAMPERS = [  # (id, change to the stage results, words the error must contain)
    ("scored-on-fewer-docs", _score("fp8", n=3), ["scored on 3 item(s)", "8"]),
    ("baseline-scored-as-accuracy", _score("bf16", metric="acc,none"), ["scored as a perplexity by some variants"]),
    ("both-scored-as-accuracy", lambda run: [_score(v, metric="acc,none")(run) for v in ("bf16", "fp8")],
     ["evaluated no perplexity task"]),
]


@pytest.mark.parametrize("name, change, words_", RECORD_TAMPERS, ids=[t[0] for t in RECORD_TAMPERS])
def test_a_tampered_perplexity_stage_result_gets_no_verdict(tmp_path, model_dir, capsys, name, change, words_):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2}).model_dump(mode="json")
    assert run_gate(tmp_path, capsys, s)[0] == 0
    change(tmp_path / "run")
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "gate: PASS" not in out, f"{name}: exit {code}\n{out}{err}"
    for w in words_:
        assert w in err, f"{name}: {w!r} not in\n{err}"
    assert all("(fix: " in ln for ln in err.splitlines() if ln.startswith("error: "))


def test_unpaired_documents_end_to_end_are_refused(tmp_path, model_dir, capsys):
    b = base_lls(6)
    var = shifted(b, [0.01] * 6)
    del var[4]
    s = built(tmp_path, model_dir, evaluation(tmp_path, "b", b, words), evaluation(tmp_path, "v", var, words),
              gates={"max_perplexity_increase": 0.2})
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "did not pair" in err and "baseline only" in err, out + err


def test_a_variant_whose_evaluation_failed_fails_the_gate(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2}).model_dump(mode="json")
    _fp8(s)["stages"].pop(EVALUATE)
    _fp8(s).update(errors=["evaluate: lm-eval exited 1"], perplexity=[],
                   metrics={k: v for k, v in _fp8(s)["metrics"].items() if not k.startswith(("ppl.", "acc."))})
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 1 and "FAILED fp8: stage errors: evaluate: lm-eval exited 1" in out, out + err
    assert "lacks ppl.suite_longppl.docs_paired" in out


def test_perplexity_reaches_mlflow_with_the_other_metrics(tmp_path, model_dir):
    """The ppl.* metrics are in the variant's metrics, which `suite.outputs.mlflow.run` logs whole (as acc.*.delta);
    the comparison itself goes to perplexity/paired.json (a fake client: importing mlflow takes seconds)."""
    from suite.outputs import mlflow as track

    class Client:
        def __init__(self):
            self.dicts = {}

        def log_dict(self, run_id, data, path):
            self.dicts[path] = data

    s = run_with(tmp_path, model_dir, SMALL)
    v, client = s.variants[1], Client()
    # the variant's nested run is logged with its params (those not logged live already) and v.metrics whole
    assert re.search(r"_log\(client, child_id, \{[^\n]*variant_params\(v, [^\n]*\n\s*v\.metrics, ",
                     (ROOT / "suite/outputs/mlflow.py").read_text())
    assert {"ppl.suite_longppl.delta", "ppl.suite_longppl.delta_ci_low", "ppl.suite_longppl.delta_ci_high"} <= set(v.metrics)
    track._tables(client, "r", v)
    assert client.dicts["perplexity/paired.json"]["comparisons"] == v.perplexity and v.perplexity[0]["n"] == 8
    track._tables(client := Client(), "r", s.variants[0])  # the baseline has no comparison
    assert client.dicts == {}


def test_the_kept_tokenizer_changed_after_the_evaluation_is_refused(tmp_path, model_dir, capsys):
    s = run_with(tmp_path, model_dir, SMALL, gates={"max_perplexity_increase": 0.2})
    assert run_gate(tmp_path, capsys, s)[0] == 0
    kept = tmp_path / "run" / "variants" / "bf16" / "tokenizer.json"
    kept.write_text(kept.read_text().replace('"[UNK]"', '"[unk]"'))
    code, out, err = run_gate(tmp_path, capsys, s)
    assert code == 2 and "tokenizer.json was changed after the evaluation" in err, out + err
