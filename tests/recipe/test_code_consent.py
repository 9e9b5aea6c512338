"""Code runs only with consent (issue 47 part 2): a task folder whose YAMLs lm-eval would turn into imports, and
trust_remote_code or an engine argument naming Python for vLLM to import, are refused by `suite validate` (exit 2,
one line each, naming the file and line or the field) unless the recipe opts in (eval.allow_task_code,
model.allow_remote_code); nothing is imported while validating."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import cli

PWNED = "/tmp/suite-test-consent-pwned"
TASK = """task: team_x
dataset_path: json
dataset_kwargs:
  data_files: {test: /tmp/none.jsonl}
test_split: test
output_type: generate_until
doc_to_text: "{{q}}"
doc_to_target: a
"""


def task_folder(tmp_path: Path, extra: str, included: str | None = None) -> Path:
    folder = tmp_path / "team-tasks"
    folder.mkdir(exist_ok=True)
    (folder / "utils.py").write_text(f"open({PWNED!r}, 'w').write('ran')\ndef f(d):\n    return d\n")
    (folder / "team_x.yaml").write_text(TASK + extra)
    if included is not None:
        outside = tmp_path / "shared"
        outside.mkdir(exist_ok=True)
        (outside / "base.yaml").write_text(included)
        (outside / "utils.py").write_text((folder / "utils.py").read_text())
    return folder


# case -> (the task YAML's extra lines, an included YAML outside the folder, a fragment of the error line)
TASK_CODE = {
    "!function": ("process_docs: !function utils.f\n", None, "team_x.yaml:9: `!function utils.f` imports and runs"),
    "custom_dataset loader": ("custom_dataset: !function utils.f\n", None, "team_x.yaml:9: `!function utils.f`"),
    "a metric function": ("metric_list:\n  - metric: !function utils.f\n", None, "team_x.yaml:10: `!function"),
    "class task": ("class: !function utils.f\n", None, "team_x.yaml:9: `class:` makes lm-eval import"),
    "class key": ("class: MyTask\n", None, "team_x.yaml:9: `class:` makes lm-eval import"),
    "python tag": ("process_docs: !!python/name:os.system\n", None, "team_x.yaml:9: `tag:yaml.org,2002:python/name"),
    "remote dataset script": ("dataset_kwargs: {trust_remote_code: true}\n", None, "loading script"),
    "through an include outside the folder": ("include: ../shared/base.yaml\n", "process_docs: !function utils.f\n",
                                              "shared/base.yaml:1: `!function utils.f`"),
}


@pytest.mark.parametrize("case", list(TASK_CODE))
def test_a_task_folder_that_would_run_code_is_refused_naming_file_and_line(case, demo_recipe_copy, tmp_path, capsys):
    extra, included, fragment = TASK_CODE[case]
    task_folder(tmp_path, extra, included)
    rc = cli.main(["validate", str(demo_recipe_copy(eval__include_path="team-tasks"))])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    said = [ln for ln in lines if "eval.include_path: " in ln and fragment in ln]
    assert rc == 2 and len(said) == 1 and "eval.allow_task_code: true" in said[0] and "Traceback" not in err, err
    assert not Path(PWNED).exists()


def test_the_opt_in_lets_a_task_folder_with_code_validate(demo_recipe_copy, tmp_path, capsys):
    task_folder(tmp_path, "process_docs: !function utils.f\n")
    path = demo_recipe_copy(eval__include_path="team-tasks", eval__allow_task_code=True)
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert not Path(PWNED).exists()  # validation reads the YAML; it never imports utils.py


def test_a_task_folder_of_data_only_needs_no_opt_in(demo_recipe_copy, tmp_path, capsys):
    task_folder(tmp_path, "metric_list:\n  - metric: exact_match\n")
    assert cli.main(["validate", str(demo_recipe_copy(eval__include_path="team-tasks"))]) == 0, capsys.readouterr().err


# case -> (changes to the demo recipe, the field the error names)
REMOTE_CODE = {
    "baseline trust_remote_code": ({"baseline__engine_args__trust_remote_code": True},
                                   "baseline.engine_args.trust_remote_code"),
    "variant trust_remote_code": ({"variants__0__engine_args__trust_remote_code": True},
                                  "variants[0].engine_args.trust_remote_code"),
    "eval trust_remote_code": ({"eval__engine_args": {"trust_remote_code": True}}, "eval.engine_args.trust_remote_code"),
    "bench_args trust_remote_code": ({"throughput__bench_args": {"trust_remote_code": True}},
                                     "throughput.bench_args.trust_remote_code"),
    "worker class": ({"baseline__engine_args__worker_cls": "evil.Worker"}, "baseline.engine_args.worker_cls"),
    "logits processors": ({"baseline__engine_args__logits_processors": ["evil.LP"]},
                          "baseline.engine_args.logits_processors"),
    "executor class": ({"baseline__engine_args__distributed_executor_backend": "evil.Executor"},
                       "baseline.engine_args.distributed_executor_backend"),
}


@pytest.mark.parametrize("case", list(REMOTE_CODE))
def test_remote_code_is_refused_without_the_opt_in(case, demo_recipe_copy, capsys):
    changes, field = REMOTE_CODE[case]
    rc = cli.main(["validate", str(demo_recipe_copy(**changes))])
    err = capsys.readouterr().err
    assert rc == 2 and f": {field}: " in err and "model.allow_remote_code: true" in err and "Traceback" not in err, err


@pytest.mark.parametrize("case", ["baseline trust_remote_code", "bench_args trust_remote_code"])
def test_remote_code_validates_with_the_opt_in(case, demo_recipe_copy, capsys):
    changes, _ = REMOTE_CODE[case]
    path = demo_recipe_copy(model__allow_remote_code=True, **changes)
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err
