"""`suite gate` cannot be fooled. The verdict is what the run folder's records give (``suite.analysis.derive``):
summary.json is a cache, so a tampered, broken or missing one changes nothing but one warning line; every tampered
stage record, run record (run.json) or policy below gets exit 2 (no verdict) or, for a variant whose stages failed,
exit 1 with the error shown; none passes, none raises a traceback.

Each case changes one valid run (which passes every gate, exit 0) the way an adversary or a broken tool would. In
process (``suite.cli.main``) for speed; one case goes through a real ``python -m suite`` to show no traceback reaches
the user.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml

from conftest import build_gated_run, edit_record, make_summary, needs_demo_model, publish_summary, run_cli
from suite import cli
from suite.runtime.errors import SuiteError
from suite.stages.registry import BENCHMARK, EVALUATE

TASKS = ("suite_gsm8k", "suite_mmlu")
N = 300
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
STALE = "summary.json is not what the run folder's records give: judged on the records; `suite summarize "


def good_run(tmp_path, gates: str = POLICY):
    """A finished run folder (tmp_path/run) that passes every gate of POLICY: per-item records of 300 items per task,
    three repetitions per load point, an SLO rate each; summary.json written from it as the runner's publish does."""
    build_gated_run(tmp_path, yaml.safe_load(gates), tasks=TASKS, n=N, slo=(4.0, 5.0))
    run = tmp_path / "run"
    publish_summary(run)
    return run


def gate(run, capsys, policy: str | bytes | None = POLICY):
    argv = ["gate", str(run), "--no-record"]
    if policy is not None:
        (run.parent / "policy.yaml").write_bytes(policy if isinstance(policy, bytes) else policy.encode())
        argv += ["--policy", str(run.parent / "policy.yaml")]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_untampered_run_passes_every_gate(tmp_path, capsys):
    code, out, err = gate(good_run(tmp_path), capsys)
    assert code == 0, out + err
    rows = [ln for ln in out.splitlines() if ln.rstrip().endswith("│") and " pass " in ln]
    assert "gate: PASS" in out and len(rows) == 11, out  # 7 accuracy gates (2 tasks), 4 serving gates
    assert f" {N} " in out  # the n of each accuracy gate is in the table
    assert STALE not in err  # summary.json is what the records give


def fp8(s):
    return next(v for v in s["variants"] if v["name"] == "fp8")


def bf16(s):
    return next(v for v in s["variants"] if v["name"] == "bf16")


DROP = object()


def metric(who, key, value):
    def change(s):
        if value is DROP:
            del who(s)["metrics"][key]
        else:
            who(s)["metrics"][key] = value
    return change


def _set(path, value):
    def change(s):
        node = s
        *parents, leaf = path
        for p in parents:
            node = node[p]
        node[leaf] = value
    return change


def _drop(path):
    def change(s):
        node = s
        *parents, leaf = path
        for p in parents:
            node = node[p]
        del node[leaf]
    return change


def _both(*changes):
    def change(s):
        for c in changes:
            c(s)
    return change


def _paired_n(n):
    def change(s):
        fp8(s)["metrics"]["acc.suite_gsm8k.items_paired"] = n
        for p in fp8(s)["paired"]:
            p["n"] = n
    return change


# (id, change to summary.json's dict): each once refused as a summary that disagreed with itself or its records; now
# the figures are the records', so each is judged as the untampered run, and the gate says summary.json is stale
CACHE_TAMPERS = [
    ("ratio-Infinity", metric(fp8, "tput.output_tok_s.ratio", math.inf)),
    ("baseline-acc--Infinity", metric(bf16, "acc.suite_gsm8k", -math.inf)),
    ("variant-acc-NaN", metric(fp8, "acc.suite_mmlu", math.nan)),
    ("ci-low-NaN", metric(fp8, "acc.suite_gsm8k.delta_ci_low", math.nan)),
    ("ttft-Infinity", metric(fp8, "tput.ttft_p99_ms", math.inf)),
    ("sustainable-ratio-NaN", metric(fp8, "tput.sustainable_rate.ratio", math.nan)),
    ("items-paired-NaN", metric(fp8, "acc.suite_gsm8k.items_paired", math.nan)),
    ("ratio-string", metric(fp8, "tput.output_tok_s.ratio", "1.3")),
    ("ratio-true", metric(fp8, "tput.output_tok_s.ratio", True)),
    ("ratio-null", metric(fp8, "tput.output_tok_s.ratio", None)),
    ("ratio-missing", metric(fp8, "tput.output_tok_s.ratio", DROP)),
    ("baseline-acc-missing", metric(bf16, "acc.suite_gsm8k", DROP)),
    ("ci-low-missing", metric(fp8, "acc.suite_gsm8k.delta_ci_low", DROP)),
    ("ttft-negative", metric(fp8, "tput.ttft_p99_ms", -5.0)),
    ("ratio-disagrees-with-throughputs", metric(fp8, "tput.output_tok_s.ratio", 9.0)),
    ("acc-disagrees-with-evaluate", metric(fp8, "acc.suite_gsm8k", 0.9)),
    ("ci-low-disagrees-with-paired-record", metric(fp8, "acc.suite_gsm8k.delta_ci_low", 0.05)),
    ("zero-items-paired", _paired_n(0)),
    ("fractional-n", _paired_n(2.5)),
    ("throughput-and-ratio-raised", _both(metric(fp8, "tput.output_tok_s", 260.0),
                                          metric(fp8, "tput.output_tok_s.ratio", 2.6))),
    ("variant-not-in-recipe", _set(["variants", 1, "name"], "fp8-evil")),
    ("duplicate-variant-name", lambda s: s["variants"].append(json.loads(json.dumps(fp8(s))))),
    ("recipe-variant-missing", lambda s: s.update(variants=[bf16(s)])),
    ("no-baseline", _set(["variants", 0, "is_baseline"], False)),
    ("two-baselines", _set(["variants", 1, "is_baseline"], True)),
    ("tasks-emptied", _set(["tasks"], [])),
    ("recipe-copy-invalid", _set(["recipe", "model"], 5)),
    ("recipe-name-mismatch", _set(["recipe_name"], "other")),
    ("not-finished", _set(["finished"], None)),
    ("baseline-has-errors", _set(["variants", 0, "errors"], ["evaluate: lm-eval exited 1"])),
    ("variant-has-errors", _set(["variants", 1, "errors"], ["benchmark: exited 2"])),
    ("variants-not-a-list", _set(["variants"], {"fp8": {}})),
    ("evaluate-removed", _drop(["variants", 1, "stages", EVALUATE])),
    ("scores-renamed", _set(["variants", 1, "stages", EVALUATE, "scores", 0, "task"], "other")),
    ("benchmark-removed", _drop(["variants", 1, "stages", BENCHMARK])),
    ("samples-files-removed", _set(["variants", 1, "stages", EVALUATE, "samples_files"], {})),
    ("steadiness-dropped", _set(["variants", 1, "stages", BENCHMARK, "slo", "steady"], None)),
]


@pytest.mark.parametrize("name, change", CACHE_TAMPERS, ids=[t[0] for t in CACHE_TAMPERS])
def test_a_tampered_summary_json_changes_nothing_but_a_warning(tmp_path, capsys, name, change):
    run = good_run(tmp_path)
    s = json.loads((run / "summary.json").read_text())
    change(s)
    (run / "summary.json").write_text(json.dumps(s))  # NaN / Infinity as Python writes them
    code, out, err = gate(run, capsys)
    assert code == 0 and "gate: PASS" in out, f"{name}: exit {code}\n{out}{err}"
    assert f"warning: {STALE}{run}` rewrites it" in err and "error: " not in err, err


RATIO = re.compile(r'"tput\.output_tok_s\.ratio": [-+.0-9e]+')
RAW_SUMMARIES = [
    ("truncated-json", lambda t: t[: len(t) // 2]),
    ("not-utf8", lambda t: b"\xff\xfe" + t.encode("utf-16-le")),
    ("json-list", lambda t: "[" + t + "]"),
    ("empty-file", lambda t: ""),
    ("nan-literal-in-ratio", lambda t: RATIO.sub('"tput.output_tok_s.ratio": NaN', t, count=1)),
    ("overflow-to-inf", lambda t: RATIO.sub('"tput.output_tok_s.ratio": 1e999', t, count=1)),
    ("duplicate-json-key", lambda t: RATIO.sub(lambda m: '"tput.output_tok_s.ratio": 9.0, ' + m.group(0), t, count=1)),
    ("deeply-nested", lambda t: "[" * 100_000 + "]" * 100_000),
]


@pytest.mark.parametrize("name, edit", RAW_SUMMARIES, ids=[t[0] for t in RAW_SUMMARIES])
def test_an_unreadable_summary_json_is_said_and_the_records_are_judged(tmp_path, capsys, name, edit):
    run = good_run(tmp_path)
    text = (run / "summary.json").read_text()
    assert RATIO.search(text)
    edited = edit(text)
    (run / "summary.json").write_bytes(edited if isinstance(edited, bytes) else edited.encode())
    code, out, err = gate(run, capsys)
    assert code == 0 and "gate: PASS" in out and STALE in err, f"{name}: exit {code}\n{out}{err}"


def test_a_run_folder_without_summary_json_is_judged_on_its_records(tmp_path, capsys):
    run = good_run(tmp_path)
    (run / "summary.json").unlink()
    code, out, err = gate(run, capsys)
    assert code == 0 and "gate: PASS" in out and STALE not in err, out + err


def _flip_one_item(run):
    path = run / "variants" / "fp8" / "samples_suite_gsm8k.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    rows[1]["acc"] = 1.0 - rows[1]["acc"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _score(variant, fld, value):
    def change(run):
        edit_record(run, variant, "evaluate.result.json", lambda d: d["scores"][0].update({fld: value}))
    return change


def _slo(value):
    def change(run):
        edit_record(run, "fp8", "benchmark.result.json", lambda d: d["slo"].update(steady=value))
    return change


def _facts(**fields):
    def change(run):
        edit_record(run, None, "run.json", lambda d: d.update(fields))
    return change


def _unlink(*parts):
    def change(run):
        for p in parts:
            (run / p).unlink()
    return change


# (id, change to the run folder's records, words the error must contain): the stage-record and run-record equivalents
# of the summary tampers above, each refused (exit 2)
RECORD_TAMPERS = [
    ("baseline-score-zeroed", _score("bf16", "value", 0.0), ["bf16: evaluate.scores.suite_gsm8k.value", "recomputed"]),
    ("variant-score-raised", _score("fp8", "value", 0.99), ["fp8: evaluate.scores.suite_gsm8k.value", "recomputed"]),
    ("variant-scored-on-fewer-items", _score("fp8", "n", 1), ["fp8: evaluate.scores.suite_gsm8k.n", "recomputed"]),
    ("score-renamed", _score("fp8", "task", "other"), ["no score for suite_gsm8k"]),
    ("samples-edited", _flip_one_item, ["samples_suite_gsm8k.jsonl was changed after the evaluation"]),
    ("samples-hash-removed", lambda run: edit_record(run, "fp8", "evaluate.result.json",
                                                     lambda d: d.update(samples_sha256={})),
     ["no sha256 recorded"]),
    ("evaluate-result-removed", _unlink("variants/fp8/evaluate.result.json"),
     ["fp8's planned evaluate job has no result"]),
    ("benchmark-result-removed", _unlink("variants/fp8/benchmark.result.json"),
     ["fp8's planned benchmark job has no result"]),
    ("benchmark-result-broken", lambda run: (run / "variants/fp8/benchmark.result.json").write_text("{"),
     ["the benchmark result is not judged"]),
    ("result-made-for-another-variant", lambda run: edit_record(run, "fp8", "evaluate.result.json",
                                                                lambda d: d["job"].update(variant="bf16")),
     ["made by bf16's evaluate job"]),
    ("steadiness-dropped", _slo(None), ["fp8: tput.sustainable_rate", "not checked for a steady state"]),
    ("baseline-has-errors", _facts(errors={"bf16": ["evaluate: lm-eval exited 1"]}),
     ["bf16", "lm-eval exited 1", "nothing can be judged"]),
    ("not-finished", _facts(finished=None), ["finished", "did not complete"]),
    ("recipe-hash-not-recorded", _facts(recipe_sha256=""), ["recipe.yaml"]),
    ("run-record-and-summary-removed", _unlink("run.json", "summary.json"), ["recipe.yaml", "recipe_sha256"]),
]


@pytest.mark.parametrize("name, change, words", RECORD_TAMPERS, ids=[t[0] for t in RECORD_TAMPERS])
def test_a_tampered_record_gets_no_verdict(tmp_path, capsys, name, change, words):
    run = good_run(tmp_path)
    change(run)
    code, out, err = gate(run, capsys, None if name.startswith("recipe") else POLICY)
    assert code == 2, f"{name}: exit {code}\n{out}{err}"
    assert "error: " in err and "gate: PASS" not in out
    for w in words:
        assert w in err, f"{name}: {w!r} not in\n{err}"
    assert all("(fix: " in ln for ln in err.splitlines() if ln.startswith("error: "))


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
    code, out, err = gate(good_run(tmp_path), capsys, policy)
    assert code == 2 and words in err and "policy.yaml" in err, f"{name}: exit {code}\n{out}{err}"
    assert "(fix: " in err


def test_policy_file_missing_or_a_folder(tmp_path, capsys):
    run = good_run(tmp_path)
    for policy, words in ((tmp_path / "nope.yaml", "policy file not found"), (tmp_path, "a directory, not a regular file")):
        assert cli.main(["gate", str(run), "--policy", str(policy)]) == 2
        assert words in capsys.readouterr().err


def test_recipe_gates_with_nan_threshold_and_no_policy(tmp_path, capsys):
    """The run's own recipe (recorded with its hash) gates with a NaN threshold: no verdict."""
    import hashlib

    run = good_run(tmp_path)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    recipe["gates"] = {"default_max_drop": math.nan}
    text = yaml.safe_dump(recipe, sort_keys=False)
    (run / "recipe.yaml").write_text(text)
    _facts(recipe_sha256=hashlib.sha256(text.encode()).hexdigest())(run)  # as the run recorded it
    code, out, err = gate(run, capsys, policy=None)
    assert code == 2 and "recipe" in err and "finite number" in err, out + err


def test_accuracy_gate_on_a_run_without_tasks(tmp_path, capsys):
    from conftest import plan_run, write_run_recipe

    s = make_summary({"bf16": {"tput.output_tok_s": 100.0},
                      "fp8": {"tput.output_tok_s": 130.0, "tput.output_tok_s.ratio": 1.3}}, tasks=())
    run = tmp_path / "run"
    run.mkdir()
    plan_run(run, write_run_recipe(run, s.model_dump(mode="json")))
    code, out, err = gate(run, capsys, "default_max_drop: 0.02\nmin_throughput_gain: 1.2\n")
    assert code == 2 and "default_max_drop" in err and "no tasks" in err, out + err


@pytest.mark.parametrize("keep_result", [False, True], ids=["numbers-missing", "numbers-present"])
def test_variant_with_errors_fails_with_the_error_shown(tmp_path, capsys, keep_result):
    """A variant whose stage failed (run.json, as the runner records it) fails, exit 1, with its error shown."""
    run = good_run(tmp_path)
    why = "benchmark: vllm bench serve exited 2: --request-rate: expected one argument"
    _facts(errors={"fp8": [why]})(run)
    if not keep_result:
        (run / "variants" / "fp8" / "benchmark.result.json").unlink()
    code, out, err = gate(run, capsys)
    assert code == 1, out + err
    assert f"FAILED fp8: stage errors: {why}" in out
    assert "gate: FAIL" in out and "error: " not in err  # a failure, not bad input
    if not keep_result:
        assert "lacks tput.output_tok_s.ratio" in out


BUILT_POLICY = ("max_drop: {suite_gsm8k: 0.02}\nnon_inferiority_margin: {suite_gsm8k: 0.05}\n"
                "min_recovery_lower_bound: {suite_gsm8k: 0.9}\nmin_throughput_gain: 1.2\nmax_ttft_p99_ms: 100\n")


def test_a_run_built_by_the_runner_passes(tmp_path, capsys):
    """The checks hold on what the runner writes (no false alarm): the same 300 items, same scores."""
    build_gated_run(tmp_path, yaml.safe_load(BUILT_POLICY), n=300)
    code, out, err = gate(tmp_path / "run", capsys, BUILT_POLICY)
    assert code == 0 and "gate: PASS" in out and " 300 " in out, out + err


def test_zero_items_paired_end_to_end(tmp_path, capsys):
    """Two evaluations with no item in common: the summary records n = 0 and no interval (the old code
    wrote delta 0, CI [0, 0], and non-inferiority passed); the gate refuses the CI gate."""
    from suite.analysis.derive import summarize

    build_gated_run(tmp_path, yaml.safe_load(BUILT_POLICY), n=300,
                    samples_path=lambda run, name, task: run / "variants" / name / f"samples_{task}.jsonl")
    path = tmp_path / "run" / "variants" / "fp8" / "samples_suite_gsm8k.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "doc_id": r["doc_id"] + 300}) + "\n" for r in rows))
    from suite.analysis.gates.recompute import sha256_file

    edit_record(tmp_path / "run", "fp8", "evaluate.result.json",
                lambda d: d["samples_sha256"].update(suite_gsm8k=sha256_file(path)))
    m = next(v for v in summarize(tmp_path / "run").variants if v.name == "fp8").metrics
    assert m["acc.suite_gsm8k.items_paired"] == 0 and "acc.suite_gsm8k.delta_ci_low" not in m
    code, out, err = gate(tmp_path / "run", capsys, BUILT_POLICY)
    assert code == 2 and "paired over 0 common item(s)" in err, out + err


def test_no_traceback_from_the_real_command(tmp_path):
    """Through `python -m suite`: a broken record and a broken policy each give one error line, exit 2."""
    run = good_run(tmp_path)
    _flip_one_item(run)
    res = run_cli("gate", str(run), "--no-record")
    assert res.returncode == 2 and "Traceback" not in res.stderr and "changed after the evaluation" in res.stderr
    (tmp_path / "p.yaml").write_bytes(b"max_drop: {suite_gsm8k: 0.02\n\xff")
    res = run_cli("gate", str(run), "--policy", str(tmp_path / "p.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "error: " in res.stderr
    assert all(ln.startswith(("error: ", "warning: ", "gate: ")) for ln in res.stderr.splitlines()), res.stderr


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
    run = good_run(tmp_path, gates="default_max_drop: 0.005\nmin_throughput_gain: 1.2\n")
    code, out, err = gate(run, capsys, "max_ttft_p99_ms: 1.0e+300\n")
    assert code == 0, out + err  # the policy is the user's to choose, but the output names it and what it dropped
    assert "instead of the recipe's gates" in out.replace("\n", " ") or "instead of the recipe's gates" in out
    assert "loosens the recipe's gate default_max_drop: 0.005 -> (none)" in err
    assert "min_throughput_gain: 1.2 -> (none)" in err
    code, out, err = gate(run, capsys, "default_max_drop: 0.02\nmin_throughput_gain: 1.2\n")
    assert "default_max_drop: 0.005 -> 0.02" in err and "min_throughput_gain" not in err
