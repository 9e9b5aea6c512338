"""`suite run` with failing benchmark stages: exit 2 and one line per failed variant with the stage's
own cause (the stage processes are stand-ins that fail the way the benchmark stage does)."""

from __future__ import annotations

from test_runner_stage import fake_stage

from suite import cli
from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV
from suite.records.quantize import QuantizeResult


def test_failed_benchmarks_exit_2_with_one_line_per_failed_variant(tmp_path, demo_recipe_copy, monkeypatch, capsys):
    quantized = QuantizeResult(checkpoint=str(tmp_path / "ckpt"), key="k", cache_hit=False, wall_s=1.0)
    causes = {"bf16": "AssertionError: Obtained non-positive request rate -1.0.",
              "fp8-kv": "OSError: [Errno 98] Address already in use"}
    script = fake_stage(tmp_path, f"""
        stage, variant = sys.argv[-3], os.path.basename(os.path.dirname(out))
        if stage == "benchmark":
            print("Traceback (most recent call last):", flush=True)
            print("suite.stages.benchmark.stage.ServerError: load point rate-inf (repetition 1): " + {causes!r}[variant], flush=True)
            print("INFO [shutdown] done", flush=True)
            sys.exit(1)
        if stage == "quantize":
            result_json = {quantized.model_dump_json()!r}
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    rc = cli.main(["run", str(demo_recipe_copy()), "--no-track"])
    err = capsys.readouterr().err
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 2, err
    for line, (variant, cause) in zip(lines, causes.items()):
        assert line.startswith(f"error: {variant}: benchmark failed (exit 1): suite.stages.benchmark.stage.ServerError: "
                               f"load point rate-inf (repetition 1): {cause} [log: ")
