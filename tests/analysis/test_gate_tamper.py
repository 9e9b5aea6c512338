"""`suite gate` cannot be fooled: every tampered summary or policy below gets exit 2 (no verdict) or, for a
variant whose stages failed, exit 1 with the error shown; none passes, none raises a traceback.

Each case mutates one valid run (which passes every gate, exit 0) the way an adversary or a broken tool
would: non-finite, missing, mistyped or inconsistent numbers, a run that is not its recipe, policies
naming what the run does not have, unreadable files. In process (``suite.cli.main``) for speed; two
cases go through a real ``python -m suite`` to show no traceback reaches the user.
"""

from __future__ import annotations

import json
import math

import pytest

from conftest import add_serving_intervals, make_summary, needs_demo_model, plan_run, run_cli, write_run_recipe
from suite import cli
from suite.runtime.errors import SuiteError
from suite.recipe import Recipe
from suite.records.evaluate import EvaluateResult, TaskScore

TASKS = ("suite_gsm8k", "suite_mmlu")
N = {"suite_gsm8k": 1319, "suite_mmlu": 14042}
BASE = {"acc.suite_gsm8k": 0.50, "acc.suite_mmlu": 0.60, "acc.mean": 0.55, "tput.output_tok_s": 100.0,
        "tput.sustainable_rate": 4.0, "tput.ttft_p99_ms": 100.0, "tput.tpot_p99_ms": 20.0}
FP8 = {"acc.suite_gsm8k": 0.49, "acc.suite_mmlu": 0.60, "acc.mean": 0.545, "tput.output_tok_s": 130.0,
       "tput.output_tok_s.ratio": 1.3, "tput.sustainable_rate": 5.0, "tput.sustainable_rate.ratio": 1.25,
       "tput.ttft_p99_ms": 120.0, "tput.tpot_p99_ms": 18.0,
       **{f"acc.{t}.{k}": v for t in TASKS for k, v in (("delta_ci_low", -0.012), ("delta_ci_high", 0.004),
                                                          ("items_paired", float(N[t])))}}
POLICY = """\
max_drop: {suite_gsm8k: 0.02}
default_max_drop: 0.03
default_max_relative_drop: 0.05
default_non_inferiority_margin: 0.02
min_recovery_lower_bound: {suite_gsm8k: 0.95}
min_throughput_gain: 1.2
min_sustainable_rate_gain: 1.1
max_ttft_p99_ms: 200
max_tpot_p99_ms: 25
"""


def good_run() -> dict:
    """A run that passes every gate of POLICY, as the dict summary.json holds."""
    s = add_serving_intervals(make_summary({"bf16": BASE, "fp8": FP8}, tasks=TASKS))
    s.recipe = Recipe.model_validate(s.recipe).model_dump(mode="json")  # as the runner writes it
    for v in s.variants:
        v.evaluate = EvaluateResult(scores=[TaskScore(task=t, metric="acc,none", value=v.metrics[f"acc.{t}"], n=N[t])
                                            for t in TASKS], results_file="r.json", wall_s=1, engine_load_s=1)
    s.variants[1].paired = [{"task": t, "metric": "acc,none", "n": N[t], "delta": -0.004, "ci_low": -0.012,
                             "ci_high": 0.004, "gained": 10, "lost": 14, "mcnemar_p": 0.5, "confidence": 0.95,
                             "ci_method": "BCa"} for t in TASKS]
    return s.model_dump(mode="json")


def gate(tmp_path, capsys, summary: dict | str | bytes, policy: str | bytes | None = POLICY):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    if isinstance(summary, dict) and isinstance(summary.get("recipe"), dict):
        summary = write_run_recipe(run, summary)
    if isinstance(summary, dict) and isinstance(summary.get("variants"), list) and all(
            isinstance(v, dict) and isinstance(v.get("name"), str) for v in summary["variants"]):
        summary = plan_run(run, summary)  # plan.json and the stage results, as the runner leaves them
    data = summary if isinstance(summary, (str, bytes)) else json.dumps(summary)  # NaN/Infinity as Python writes
    (run / "summary.json").write_bytes(data if isinstance(data, bytes) else data.encode())
    argv = ["gate", str(run), "--no-record"]
    if policy is not None:
        (tmp_path / "policy.yaml").write_bytes(policy if isinstance(policy, bytes) else policy.encode())
        argv += ["--policy", str(tmp_path / "policy.yaml")]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def fp8(s):
    return next(v for v in s["variants"] if v["name"] == "fp8")


def bf16(s):
    return next(v for v in s["variants"] if v["name"] == "bf16")


def metric(who, key, value):
    def change(s):
        if value is DROP:
            del who(s)["metrics"][key]
        else:
            who(s)["metrics"][key] = value
    return change


DROP = object()


def test_the_untampered_run_passes_every_gate(tmp_path, capsys):
    code, out, err = gate(tmp_path, capsys, good_run())
    assert code == 0, out + err
    rows = [ln for ln in out.splitlines() if ln.rstrip().endswith("│") and " pass " in ln]
    assert "gate: PASS" in out and len(rows) == 11, out  # 7 accuracy gates (2 tasks), 4 serving gates
    assert "1319" in out and "14042" in out  # the n of each accuracy gate is in the table


def _set(path, value):
    def change(s):
        node = s
        *parents, leaf = path
        for p in parents:
            node = node[p]
        node[leaf] = value
    return change


def _rename(old, new):
    def change(s):
        next(v for v in s["variants"] if v["name"] == old)["name"] = new
    return change


def _extra_variant(s):
    s["variants"].append({**fp8(s), "name": "fp8-extra"})


def _duplicate_variant(s):
    s["variants"].append(json.loads(json.dumps(fp8(s))))


def _drop_variant(s):
    s["variants"] = [v for v in s["variants"] if v["name"] != "fp8"]


def _no_paired_record(s):
    fp8(s)["paired"] = []


def _paired_n(n):
    def change(s):
        fp8(s)["metrics"]["acc.suite_gsm8k.items_paired"] = n
        for p in fp8(s)["paired"]:
            p["n"] = n
    return change


def _both(*changes):
    def change(s):
        for c in changes:
            c(s)
    return change


# (id, change to the summary dict, words the error must contain)
SUMMARY_TAMPERS = [
    ("ratio-Infinity", metric(fp8, "tput.output_tok_s.ratio", math.inf), ["fp8", "tput.output_tok_s.ratio", "inf"]),
    ("baseline-acc--Infinity", metric(bf16, "acc.suite_gsm8k", -math.inf), ["bf16", "acc.suite_gsm8k", "-inf"]),
    ("variant-acc-NaN", metric(fp8, "acc.suite_mmlu", math.nan), ["fp8", "acc.suite_mmlu", "nan"]),
    ("ci-low-NaN", metric(fp8, "acc.suite_gsm8k.delta_ci_low", math.nan), ["fp8", "delta_ci_low"]),
    ("ttft-Infinity", metric(fp8, "tput.ttft_p99_ms", math.inf), ["fp8", "tput.ttft_p99_ms"]),
    ("sustainable-ratio-NaN", metric(fp8, "tput.sustainable_rate.ratio", math.nan), ["tput.sustainable_rate.ratio"]),
    ("items-paired-NaN", metric(fp8, "acc.suite_gsm8k.items_paired", math.nan), ["items_paired"]),
    ("ratio-string", metric(fp8, "tput.output_tok_s.ratio", "1.3"), ["tput.output_tok_s.ratio", "not a number"]),
    ("ratio-string-inf", metric(fp8, "tput.output_tok_s.ratio", "inf"), ["tput.output_tok_s.ratio", "not a number"]),
    ("ratio-true", metric(fp8, "tput.output_tok_s.ratio", True), ["tput.output_tok_s.ratio", "not a number"]),
    ("ratio-null", metric(fp8, "tput.output_tok_s.ratio", None), ["tput.output_tok_s.ratio", "not a number"]),
    ("ratio-missing", metric(fp8, "tput.output_tok_s.ratio", DROP), ["fp8", "tput.output_tok_s.ratio", "missing"]),
    ("baseline-acc-missing", metric(bf16, "acc.suite_gsm8k", DROP), ["bf16", "acc.suite_gsm8k", "missing"]),
    ("ci-low-missing", metric(fp8, "acc.suite_gsm8k.delta_ci_low", DROP), ["delta_ci_low", "missing"]),
    ("ttft-negative", metric(fp8, "tput.ttft_p99_ms", -5.0), ["tput.ttft_p99_ms", "below 0"]),
    ("ratio-negative", metric(fp8, "tput.output_tok_s.ratio", -1.3), ["tput.output_tok_s.ratio", "below 0"]),
    ("ratio-disagrees-with-throughputs", metric(fp8, "tput.output_tok_s.ratio", 9.0), ["ratio", "130"]),
    ("acc-disagrees-with-evaluate", metric(fp8, "acc.suite_gsm8k", 0.6), ["acc.suite_gsm8k", "evaluate result"]),
    ("ci-low-disagrees-with-paired-record", metric(fp8, "acc.suite_gsm8k.delta_ci_low", 0.05), ["paired record"]),
    ("n-disagrees-with-paired-record", metric(fp8, "acc.suite_gsm8k.items_paired", 5.0), ["items_paired", "1319"]),
    ("zero-items-paired", _paired_n(0), ["items_paired", "0 common item"]),
    ("one-item-paired", _paired_n(1), ["1 common item"]),
    ("fractional-n", _paired_n(2.5), ["not a count"]),
    ("n-nowhere", _both(metric(fp8, "acc.suite_gsm8k.items_paired", DROP), _no_paired_record),
     ["items_paired", "how many items"]),
    ("baseline-acc-zero-relative-gate", _both(metric(bf16, "acc.suite_gsm8k", 0.0),
                                              _set(["variants", 0, "evaluate", "scores", 0, "value"], 0.0)),
     ["bf16", "undefined"]),
    ("variant-not-in-recipe", _rename("fp8", "fp8-evil"), ["fp8-evil", "does not have"]),
    ("extra-variant", _extra_variant, ["fp8-extra", "does not have"]),
    ("recipe-variant-missing", _drop_variant, ["fp8", "unjudged"]),
    ("duplicate-variant-name", _duplicate_variant, ["repeated: fp8"]),
    ("no-baseline", _set(["variants", 0, "is_baseline"], False), ["no variant is the baseline"]),
    ("two-baselines", _set(["variants", 1, "is_baseline"], True), ["2 baselines"]),
    ("baseline-swapped", _both(_set(["variants", 0, "is_baseline"], False), _set(["variants", 1, "is_baseline"], True)),
     ["fp8", "recipe's baseline is 'bf16'"]),
    ("tasks-emptied", _set(["tasks"], []), ["tasks", "recipe evaluates"]),
    ("task-dropped", _set(["tasks"], ["suite_gsm8k"]), ["tasks", "recipe evaluates"]),
    ("recipe-copy-invalid", _set(["recipe", "model"], 5), ["recipe", "not a valid recipe"]),
    ("recipe-name-mismatch", _set(["recipe_name"], "other"), ["recipe_name", "other"]),
    ("not-finished", _set(["finished"], None), ["finished", "did not complete"]),
    ("baseline-has-errors", _set(["variants", 0, "errors"], ["evaluate: lm-eval exited 1"]),
     ["bf16", "lm-eval exited 1", "nothing can be judged"]),
    ("variants-not-a-list", _set(["variants"], {"fp8": {}}), ["variants", "not a suite summary"]),
    # found by an adversarial review: a cross-check that only ran when both figures were there was
    # switched off by deleting the other one
    ("acc-edited-evaluate-removed", _both(metric(fp8, "acc.suite_gsm8k", 0.6), _set(["variants", 1, "evaluate"], None)),
     ["acc.suite_gsm8k", "no evaluate score record"]),
    ("acc-edited-score-renamed", _both(metric(fp8, "acc.suite_gsm8k", 0.6),
                                       _set(["variants", 1, "evaluate", "scores", 0, "task"], "other")),
     ["acc.suite_gsm8k", "no evaluate score record"]),
    ("ratio-edited-throughput-removed", _both(metric(fp8, "tput.output_tok_s.ratio", 9.0),
                                              metric(fp8, "tput.output_tok_s", DROP)), ["ratio", "cannot be checked"]),
    ("ratio-edited-baseline-throughput-zero", _both(metric(fp8, "tput.output_tok_s.ratio", 9.0),
                                                    metric(bf16, "tput.output_tok_s", 0.0)), ["cannot be checked"]),
    ("ci-low-edited-paired-record-removed", _both(metric(fp8, "acc.suite_gsm8k.delta_ci_low", 0.05), _no_paired_record),
     ["no paired record"]),
    ("variant-scored-on-fewer-items", _set(["variants", 1, "evaluate", "scores", 0, "n"], 1),
     ["scored on 1 item", "1319"]),
    # a throughput figure raised together with its ratio agrees with itself, not with the benchmark record
    ("throughput-and-ratio-raised", _both(metric(fp8, "tput.output_tok_s", 260.0),
                                          metric(fp8, "tput.output_tok_s.ratio", 2.6)),
     ["fp8: tput.output_tok_s", "benchmark record gives 130"]),
    ("sustainable-rate-and-ratio-raised", _both(metric(fp8, "tput.sustainable_rate", 8.0),
                                                metric(fp8, "tput.sustainable_rate.ratio", 2.0)),
     ["fp8: tput.sustainable_rate", "benchmark record gives 5"]),
    ("variant-ttft-lowered", metric(fp8, "tput.ttft_p99_ms", 10.0), ["tput.ttft_p99_ms", "benchmark record"]),
    ("benchmark-record-removed", _set(["variants", 1, "benchmark"], None), ["no benchmark record"]),
    ("steadiness-dropped", _set(["variants", 1, "benchmark", "slo", "steady"], None),
     ["fp8: tput.sustainable_rate", "not checked for a steady state"]),
]


@pytest.mark.parametrize("name, change, words", SUMMARY_TAMPERS, ids=[t[0] for t in SUMMARY_TAMPERS])
def test_tampered_summary_gets_no_verdict(tmp_path, capsys, name, change, words):
    s = good_run()
    change(s)
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 2, f"{name}: exit {code}\n{out}{err}"
    assert "error: " in err and "gate: PASS" not in out
    for w in words:
        assert w in err, f"{name}: {w!r} not in\n{err}"
    assert all("(fix: " in ln for ln in err.splitlines() if ln.startswith("error: "))


RAW_SUMMARIES = [
    ("truncated-json", lambda t: t[: len(t) // 2], "not JSON"),
    ("not-utf8", lambda t: b"\xff\xfe" + t.encode("utf-16-le"), "not UTF-8"),
    ("json-list", lambda t: "[" + t + "]", "a JSON object expected"),
    ("empty-file", lambda t: "", "not JSON"),
    ("nan-literal-in-ratio", lambda t: t.replace('"tput.output_tok_s.ratio": 1.3', '"tput.output_tok_s.ratio": NaN'),
     "tput.output_tok_s.ratio"),
    ("overflow-to-inf", lambda t: t.replace('"tput.output_tok_s.ratio": 1.3', '"tput.output_tok_s.ratio": 1e999'),
     "inf"),
    ("duplicate-json-key", lambda t: t.replace('"tput.output_tok_s.ratio": 1.3',
                                               '"tput.output_tok_s.ratio": 0.5, "tput.output_tok_s.ratio": 1.3'),
     "duplicate key 'tput.output_tok_s.ratio'"),
    ("deeply-nested", lambda t: "[" * 100_000 + "]" * 100_000, "nested more than 128 levels deep"),
]


@pytest.mark.parametrize("name, edit, words", RAW_SUMMARIES, ids=[t[0] for t in RAW_SUMMARIES])
def test_unreadable_summary_file_is_bad_input(tmp_path, capsys, name, edit, words):
    text = json.dumps(good_run())
    assert '"tput.output_tok_s.ratio": 1.3' in text
    code, out, err = gate(tmp_path, capsys, edit(text))
    assert code == 2 and words in err and "summary.json" in err, f"{name}: exit {code}\n{out}{err}"


POLICY_TAMPERS = [
    # each next to a valid gate: the old code's "checks nothing" exit 2 cannot stand in for the refusal
    ("max-drop-unevaluated-task", "max_drop: {suite_gsm8k: 0.02, suite_humaneval: 0.02}\n",
     "max_drop.suite_humaneval"),
    ("relative-drop-unevaluated-task", "max_relative_drop: {suite_ceval: 0.02}\nmin_throughput_gain: 1.2\n",
     "max_relative_drop.suite_ceval"),
    ("non-inferiority-unevaluated-task", "non_inferiority_margin: {mmlu: 0.02}\ndefault_max_drop: 0.02\n",
     "non_inferiority_margin.mmlu"),
    ("recovery-unevaluated-task", "min_recovery_lower_bound: {gsm8k: 0.9, suite_gsm8k: 0.9}\n",
     "min_recovery_lower_bound.gsm8k"),
    ("yaml-syntax-error", "max_drop: {suite_gsm8k: 0.02\n", "not valid YAML"),
    ("yaml-tab-indent", "max_drop:\n\tsuite_gsm8k: 0.02\n", "not valid YAML"),
    ("not-utf8", "default_max_drop: 0.02 # caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("a-list", "- default_max_drop: 0.02\n", "a YAML mapping"),
    ("a-scalar", "0.02\n", "a YAML mapping"),
    ("empty", "", "empty"),
    ("comments-only", "# nothing\n", "empty"),
    ("typo", "max_dorp: 0.02\n", "unknown key"),
    ("threshold-nan", "default_max_drop: .nan\n", "finite number"),
    ("threshold-inf", "default_max_drop: .inf\n", "finite number"),
    ("per-task-threshold-inf", "max_drop: {suite_gsm8k: .inf}\n", "finite number"),
    ("min-gain-inf", "min_throughput_gain: .inf\n", "finite number"),
    ("min-gain-negative-inf", "min_throughput_gain: -.inf\n", "min_throughput_gain"),
    ("duplicate-key", "default_max_drop: 0.5\ndefault_max_drop: 0.01\n", "key 'default_max_drop' appears twice (lines 1 and 2)"),
    ("scalar-for-mapping", "max_drop: 0.02\n", "max_drop"),
    ("word-for-number", "max_drop: {suite_gsm8k: lots}\n", "max_drop.suite_gsm8k"),
    ("python-tag", "default_max_drop: !!python/object/apply:os.getpid []\n", "not valid YAML"),
    ("a-whole-recipe", "name: x\nmodel: {id: m}\nbaseline: {name: b}\ngates: {default_max_drop: 0.02}\n",
     "this is a recipe"),
]


@pytest.mark.parametrize("name, policy, words", POLICY_TAMPERS, ids=[t[0] for t in POLICY_TAMPERS])
def test_bad_policy_is_bad_input(tmp_path, capsys, name, policy, words):
    code, out, err = gate(tmp_path, capsys, good_run(), policy)
    assert code == 2 and words in err and "policy.yaml" in err, f"{name}: exit {code}\n{out}{err}"
    assert "(fix: " in err


def test_policy_file_missing_or_a_folder(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(good_run()))
    for policy, words in ((tmp_path / "nope.yaml", "policy file not found"), (tmp_path, "a directory, not a regular file")):
        assert cli.main(["gate", str(run), "--policy", str(policy)]) == 2
        assert words in capsys.readouterr().err


def test_recipe_gates_with_nan_threshold_and_no_policy(tmp_path, capsys):
    s = good_run()
    s["recipe"]["gates"] = {"default_max_drop": math.nan}
    code, out, err = gate(tmp_path, capsys, s, policy=None)
    assert code == 2 and "recipe" in err and "finite number" in err


def test_accuracy_gate_on_a_run_without_tasks(tmp_path, capsys):
    s = make_summary({"bf16": {"tput.output_tok_s": 100.0},
                      "fp8": {"tput.output_tok_s": 130.0, "tput.output_tok_s.ratio": 1.3}}, tasks=())
    code, out, err = gate(tmp_path, capsys, s.model_dump(mode="json"), "default_max_drop: 0.02\n"
                          "min_throughput_gain: 1.2\n")
    assert code == 2 and "default_max_drop" in err and "no tasks" in err


def _errors(s, keep_metrics: bool):
    v = fp8(s)
    v["errors"] = ["benchmark: vllm bench serve exited 2: --request-rate: expected one argument"]
    if not keep_metrics:
        v["metrics"] = {k: x for k, x in v["metrics"].items() if not k.startswith("tput")}


@pytest.mark.parametrize("keep_metrics", [False, True], ids=["numbers-missing", "numbers-present"])
def test_variant_with_errors_fails_with_the_error_shown(tmp_path, capsys, keep_metrics):
    s = good_run()
    _errors(s, keep_metrics)
    code, out, err = gate(tmp_path, capsys, s)
    assert code == 1, out + err
    assert ("FAILED fp8: stage errors: benchmark: vllm bench serve exited 2: --request-rate: expected one argument"
            in out)
    assert "gate: FAIL" in out and "error: " not in err  # a failure, not bad input
    if not keep_metrics:
        assert "lacks tput.output_tok_s.ratio, tput.sustainable_rate.ratio" in out


def built_run(tmp_path, base_ids, var_ids, var_tok_s=130.0) -> dict:
    """A summary made the way `suite run` makes one (variant_metrics, add_deltas, add_paired) from stage
    results: samples files with the given doc ids, one load point each."""
    from suite.records.benchmark import BenchmarkResult, LoadPoint
    from suite.records.summary import VariantSummary
    from suite.analysis.summary import add_deltas, add_paired, variant_metrics

    def evaluation(name, doc_ids):
        f = tmp_path / f"samples_{name}.jsonl"
        rows = [{"task": "suite_gsm8k", "doc_id": i, "filter": "none", "acc": float(i % 3 != 0)} for i in doc_ids]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        value = sum(r["acc"] for r in rows) / len(rows)
        return EvaluateResult(scores=[TaskScore(task="suite_gsm8k", metric="acc,none", value=value, n=len(rows))],
                              results_file="r.json", samples_files={"suite_gsm8k": str(f)}, wall_s=1, engine_load_s=1)

    def bench(tok_s):
        return BenchmarkResult(points=[LoadPoint(label="rate-inf", output_tok_s=tok_s, req_s=1.0, ttft_p99_ms=90.0,
                                                 tpot_p99_ms=15.0)], server_start_s=1, wall_s=1, server_log="l")

    s = make_summary({"bf16": {}, "fp8": {}}, tasks=("suite_gsm8k",))
    s.recipe = Recipe.model_validate(s.recipe).model_dump(mode="json")
    s.variants = [VariantSummary(name="bf16", is_baseline=True, model_path="/m", evaluate=evaluation("a", base_ids),
                                 benchmark=bench(100.0)),
                  VariantSummary(name="fp8", is_baseline=False, model_path="/m", evaluate=evaluation("b", var_ids),
                                 benchmark=bench(var_tok_s))]
    for v in s.variants:
        v.metrics = variant_metrics(v, "max")
    add_deltas(s.variants)
    add_paired(s.variants)
    return add_serving_intervals(s).model_dump(mode="json")


BUILT_POLICY = ("max_drop: {suite_gsm8k: 0.02}\nnon_inferiority_margin: {suite_gsm8k: 0.05}\n"
                "min_recovery_lower_bound: {suite_gsm8k: 0.9}\nmin_throughput_gain: 1.2\nmax_ttft_p99_ms: 100\n")


def test_a_run_built_by_the_runner_passes(tmp_path, capsys):
    """The consistency checks hold on what the runner writes (no false alarm): the same 300 items, same scores."""
    code, out, err = gate(tmp_path, capsys, built_run(tmp_path, range(300), range(300)), BUILT_POLICY)
    assert code == 0 and "gate: PASS" in out and " 300 " in out, out + err


def test_zero_items_paired_end_to_end(tmp_path, capsys):
    """Two evaluations with no item in common: the summary records n = 0 and no interval (the old code
    wrote delta 0, CI [0, 0], and non-inferiority passed); the gate refuses the CI gate."""
    s = built_run(tmp_path, range(0, 300), range(300, 600))
    m = fp8(s)["metrics"]
    assert m["acc.suite_gsm8k.items_paired"] == 0 and "acc.suite_gsm8k.delta_ci_low" not in m
    code, out, err = gate(tmp_path, capsys, s, BUILT_POLICY)
    assert code == 2 and "paired over 0 common item(s)" in err, out + err


def test_no_traceback_from_the_real_command(tmp_path):
    """Through `python -m suite`: a broken policy and a broken summary each give one error line, exit 2."""
    run = tmp_path / "run"
    run.mkdir()
    s = good_run()
    s["variants"][0]["is_baseline"] = False  # no baseline: the old code raised StopIteration
    # the gate takes its gates from the run folder's recipe.yaml (hash-checked): the runner writes it
    (run / "summary.json").write_text(json.dumps(write_run_recipe(run, s)))
    res = run_cli("gate", str(run), "--no-record")
    assert res.returncode == 2 and "Traceback" not in res.stderr and "no variant is the baseline" in res.stderr
    (run / "summary.json").write_text(json.dumps(write_run_recipe(run, good_run())))
    (tmp_path / "p.yaml").write_bytes(b"max_drop: {suite_gsm8k: 0.02\n\xff")
    res = run_cli("gate", str(run), "--policy", str(tmp_path / "p.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.startswith("error: ")


@needs_demo_model()
@pytest.mark.parametrize("gates", [
    {"non_inferiority_margin": {"suite_humaneval_x": 0.02}},
    {"min_recovery_lower_bound": {"mmlu": 0.99}},
    {"max_relative_drop": {"gsm8k": 0.01}},
    {"max_drop": {"suite_mmlu": float("inf")}},
])
def test_validate_refuses_gates_the_gate_would_refuse(demo_recipe_copy, gates):
    from suite.recipe import load_recipe

    with pytest.raises(SuiteError) as e:
        load_recipe(demo_recipe_copy(gates=gates), serving=False)
    (gate_name, task), = ((k, t) for k, v in gates.items() for t in v)
    assert any(p.field == f"gates.{gate_name}.{task}" for p in e.value.problems), str(e.value)


def test_a_policy_that_replaces_the_recipes_gates_says_so_and_what_it_loosens(tmp_path, capsys):
    """`--policy` replaces the recipe's gates (found by an adversarial review: a policy holding only a
    huge latency limit passed a run its recipe fails, and nothing said so)."""
    s = good_run()
    s["recipe"]["gates"] = {"default_max_drop": 0.005, "min_throughput_gain": 1.2}
    code, out, err = gate(tmp_path, capsys, s, "max_ttft_p99_ms: 1.0e+300\n")
    assert code == 0  # the policy is the user's to choose, but the output names it and what it dropped
    assert "instead of the recipe's gates" in out.replace("\n", " ") or "instead of the recipe's gates" in out
    assert "loosens the recipe's gate default_max_drop: 0.005 -> (none)" in err
    assert "min_throughput_gain: 1.2 -> (none)" in err
    code, out, err = gate(tmp_path, capsys, s, "default_max_drop: 0.02\nmin_throughput_gain: 1.2\n")
    assert "default_max_drop: 0.005 -> 0.02" in err and "min_throughput_gain" not in err
