"""A package outside `suite` adds a stage, a gate, an output, a scheme and a command through Python entry points only:
a ``*.dist-info/entry_points.txt`` on the path, nothing in suite/ edited, nothing installed. Its stage is planned,
ordered in the DAG and run as a stage process (``python -m suite.stages NAME``, a fresh interpreter that finds the
stage through the same entry points); its gate judges, its output is written, its scheme validates, its command runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import build_gated_run, make_summary
from suite.analysis.gates.registry import GATES
from suite.cli.commands import COMMANDS
from suite.outputs.sinks import SINKS
from suite.records.schemes import SCHEMES
from suite.stages.registry import QUANTIZE, STAGES

STAGE, GATE, SINK, SCHEME, COMMAND = "toyplug-count", "toyplug-ttft", "toyplug-out", "FP8_TOYPLUG", "toyplug"

MODULES = {
    "stage.py": '''
        """A toy stage: counts the files of the model folder it is given."""
        from pathlib import Path
        from suite.records.base import Record
        from suite.stages.registry import QUANTIZE, SERVE_ENV, StageSpec

        class ToyConfig(Record):
            model: str
            output_dir: str

        class ToyResult(Record):
            files: int

        def run(cfg):
            return ToyResult(files=sum(1 for f in Path(cfg.model).iterdir() if f.is_file()))

        def build(ctx, spec):
            if ctx.config(QUANTIZE) is None:
                return None
            return ToyConfig(model=ctx.model_path, output_dir=str(ctx.vdir / spec.output_dirs[0]))

        SPEC = StageSpec("toyplug-count", ToyConfig, ToyResult, SERVE_ENV, "toyplug.stage:run",
                         config_builder="toyplug.stage:build", output_dirs=("toyplug-count",), prerequisite=True,
                         before="evaluate")
    ''',
    "gate.py": '''
        """A toy gate: half the variant's p99 TTFT against max_ttft_p99_ms."""
        from suite.analysis.gates.base import check
        from suite.analysis.gates.registry import Gate

        def toy(ctx):
            if (limit := ctx.setting("max_ttft_p99_ms")) is not None:
                ctx.add(check(ctx.v.name, "toyplug ttft", ctx.v.metrics["tput.ttft_p99_ms"] / 2, limit, True))

        GATE = Gate("toyplug-ttft", "max_ttft_p99_ms", ("tput.ttft_p99_ms",), toy)
    ''',
    "output.py": '''
        """A toy output: the number of variants, in toyplug.txt."""
        from suite.outputs.sinks import Sink

        def write(summary, run_dir, ctx):
            (run_dir / "toyplug.txt").write_text(f"{len(summary.variants)}\\n")

        SINK = Sink("toyplug-out", write)
    ''',
    "scheme.py": '''
        """A toy scheme."""
        from suite.records.schemes import Scheme

        SCHEME = Scheme("FP8_TOYPLUG", "a toy scheme", needs_calibration=True, weights="tensor",
                        activations="static tensor")
    ''',
    "command.py": '''
        """`suite toyplug`: says hello."""
        NAME = "toyplug"
        HELP = "a toy command"
        DESCRIPTION = None
        EXAMPLES = ["suite toyplug"]

        def add_arguments(parser):
            parser.add_argument("--code", type=int, default=0)

        def run(args):
            print("toyplug says hello")
            return args.code
    ''',
}
ENTRY_POINTS = f"""
[suite.stages]
{STAGE} = toyplug.stage:SPEC
[suite.gates]
{GATE} = toyplug.gate:GATE
[suite.outputs]
{SINK} = toyplug.output:SINK
[suite.schemes]
{SCHEME} = toyplug.scheme:SCHEME
[suite.commands]
{COMMAND} = toyplug.command
"""
REGISTRIES = ((STAGES, STAGE), (GATES, GATE), (SINKS, SINK), (SCHEMES, SCHEME), (COMMANDS, COMMAND))


def write_package(root: Path, entry_points: str = ENTRY_POINTS, modules=MODULES) -> Path:
    """The package ``toyplug`` and its distribution metadata under ``root`` (what `pip install` would leave)."""
    (root / "toyplug").mkdir(parents=True)
    (root / "toyplug" / "__init__.py").write_text('"""A plug-in package for suite, outside it."""\n')
    for name, text in modules.items():
        (root / "toyplug" / name).write_text(textwrap.dedent(text))
    info = root / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plug-in on this process's path and on PYTHONPATH (for the stage processes), each registry read again."""
    root = write_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p))
    try:
        for reg, _ in REGISTRIES:
            reg.discover()
        yield root
    finally:
        for reg, name in REGISTRIES:
            reg.unregister(name)
        forget_package()


def forget_package() -> None:
    """Another test's toyplug (another folder) is imported afresh."""
    for name in [m for m in sys.modules if m == "toyplug" or m.startswith("toyplug.")]:
        del sys.modules[name]


def test_the_registries_find_the_plugin_by_entry_point(plugin):
    for reg, name in REGISTRIES:
        assert name in reg and reg.origin(name).startswith(f"entry point [{reg.group}] {name} = toyplug")
    assert STAGES[STAGE].entry == "toyplug.stage:run" and GATES[GATE].field == "max_ttft_p99_ms"
    assert list(SINKS)[-2:] == [SINK, "manifest"]  # the signed manifest stays last


def test_the_plugin_stage_is_planned_and_runs_as_a_stage_process(plugin, demo_recipe_copy, tmp_path):
    from suite.analysis.derive import summarize
    from suite.analysis.load import load_summary
    from suite.orchestrate.rundir import plan_json
    from suite.orchestrate.stageproc import run_stage
    from suite.plan import dag
    from suite.plan.planner import make_plan
    from suite.recipe import load_recipe
    from suite.runtime.envs import with_suite_on_path
    from suite.stages.registry import EVALUATE, run_order

    order = run_order()
    assert order.index(QUANTIZE) < order.index(STAGE) == order.index(EVALUATE) - 1  # its spec's `before`
    recipe = load_recipe(path := demo_recipe_copy())
    plan = make_plan(recipe, tmp_path / "run")
    dag.check(plan.dag)
    deps = {j.id: j.deps for j in plan.dag}
    assert deps[f"{STAGE}:fp8-kv"] == (f"{QUANTIZE}:fp8-kv",) and f"{STAGE}:bf16" not in deps
    assert f"{STAGE}:fp8-kv" in deps[f"{EVALUATE}:fp8-kv"]  # a prerequisite: evaluate waits for it
    cfg = plan.variants[1].config(STAGE).model_copy(update={"model": str(recipe.model_path())})
    vdir = tmp_path / "run" / "variants" / "fp8-kv"
    vdir.mkdir(parents=True)
    outcome = run_stage(STAGE, cfg, vdir, with_suite_on_path(dict(os.environ)))
    assert outcome.error is None, outcome.error
    files = sum(1 for f in Path(recipe.model_path()).iterdir() if f.is_file())
    assert type(outcome.result).__name__ == "ToyResult" and outcome.result.files == files > 0
    assert json.loads((vdir / f"{STAGE}.result.json").read_text())["files"] == files
    # its result has its place in the summary, by its stage name, typed by its registry entry, and in summary.json
    run = tmp_path / "run"
    shutil.copy(path, run / "recipe.yaml")
    (run / "plan.json").write_text(plan_json(plan, recipe.path))
    summary = summarize(run)
    toy = {v.name: v.stages.get(STAGE) for v in summary.variants}
    assert toy["bf16"] is None and type(toy["fp8-kv"]).__name__ == "ToyResult" and toy["fp8-kv"].files == files
    summary.write(run / "summary.json", root=run)
    assert json.loads((run / "summary.json").read_text())["variants"][1]["stages"][STAGE] == {"files": files}
    assert load_summary(str(run)).variants[1].stages[STAGE] == toy["fp8-kv"]


def test_the_plugin_gate_output_scheme_and_command_work(plugin, tmp_path, capsys):
    from suite.analysis import gate
    from suite.cli import main
    from suite.outputs.publish import publish
    from suite.recipe import Recipe
    from suite.recipe.schema import QuantizationSpec
    from suite.records.summary import RunSummary

    s = RunSummary.model_validate(build_gated_run(tmp_path, {"max_ttft_p99_ms": 50}))
    checks = [c for c in gate.run(gate.GateConfig(s, Recipe.model_validate(s.recipe).gates)).checks
              if c.gate == "toyplug ttft"]
    assert len(checks) == 1 and checks[0].passed
    summary = make_summary({"bf16": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5},
                            "fp8": {"acc.suite_gsm8k": 0.5, "acc.suite_mmlu": 0.5}}, run_dir=str(tmp_path / "out"))
    (out := tmp_path / "out").mkdir()
    publish(summary, out, out, track=False, resumed=False, report=lambda *e: None)
    assert (out / "toyplug.txt").read_text() == "2\n"
    assert QuantizationSpec(scheme=SCHEME, calibration="chat-demo").scheme == SCHEME
    assert main(["toyplug", "--code", "3"]) == 3 and "toyplug says hello" in capsys.readouterr().out


def test_a_plugin_entry_point_that_does_not_load_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """The command line and the stage process both answer a broken plug-in with its one line, not a traceback."""
    import subprocess

    from suite.cli import main

    root = write_package(tmp_path / "site", f"[suite.commands]\n{COMMAND} = toyplug.missing\n"
                                            f"[suite.stages]\n{STAGE} = toyplug.stage:NOPE\n")
    monkeypatch.syspath_prepend(str(root))
    try:
        COMMANDS.discover()
        assert main(["tasks"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(
            f"error: entry point [suite.commands] {COMMAND} = toyplug.missing (distribution toyplug): toyplug: "
            "'toyplug.missing' does not load: ModuleNotFoundError")
    finally:
        COMMANDS.unregister(COMMAND)
        forget_package()
    repo = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": os.pathsep.join((str(root), str(repo))), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "suite.stages", STAGE, "c.json", "r.json"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("RegistryError: entry point [suite.stages]")
    assert "has no attribute 'NOPE'" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_plugin_may_not_take_a_builtin_name(tmp_path, monkeypatch):
    from suite.records.registry import RegistryError

    root = write_package(tmp_path / "site", "[suite.gates]\nmax_drop = toyplug.gate:GATE\n")
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(RegistryError, match=r"max_drop: a gate of that name is already registered \(suite's own"):
        GATES.discover()
