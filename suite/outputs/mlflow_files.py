"""Which files of a run folder go to a variant's MLflow run, and under which artifact folder."""

from __future__ import annotations

from pathlib import Path

from suite.records.summary import VariantSummary
from suite.outputs.gpu_series import monitor_files
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.records.quantize import QuantizeResult

OUTPUT_PNGS = ("frontier_png", "frontier_cost_png", "timeline_png")  # the run's pictures, on the parent run


STAGE_FILES = ("*.log", "*.stacks.json")  # each stage process's log and its stack profile (suite.runtime.stacks)
# a served evaluation's log and stack profile, in the folder of the stage that served it (suite.stages.benchmark.served)
SERVED_FILES = ("evaluate.log", "evaluate.stacks.json")
MAX_STAGE_FILE_BYTES = 64 << 20  # a stage that printed in a loop: its log stays in the run folder, not uploaded


def stage_files(vdir: Path) -> list[tuple[str, str]]:
    """Each stage's log and stack profile in a variant's folder (``stages/``), and a served evaluation's, which runs
    inside another stage's folder (the benchmark's: ``variants/<name>/benchmark/evaluate.log``) and goes to
    ``stages/served/``; a file over ``MAX_STAGE_FILE_BYTES`` is left out, with a warning."""
    import warnings

    found = [(f, "stages") for pattern in STAGE_FILES for f in sorted(vdir.glob(pattern))]
    found += [(f, "stages/served") for name in SERVED_FILES for f in sorted(vdir.glob(f"*/{name}")) if f.is_file()]
    kept = []
    for f, folder in found:
        if (size := f.stat().st_size) > MAX_STAGE_FILE_BYTES:
            warnings.warn(f"{f}: {size >> 20} MiB, not logged to MLflow (over "
                          f"{MAX_STAGE_FILE_BYTES >> 20} MiB); it stays in the run folder", stacklevel=2)
            continue
        kept.append((str(f), folder))
    return kept


def variant_artifacts(v: VariantSummary, vdir: Path | None = None) -> list[tuple[str, str]]:
    """The variant's raw files: lm-eval's results and samples, vLLM's benchmark JSONs, the monitor's samples,
    the checkpoint's provenance, and (from its folder ``vdir``) every stage's log and stack profile."""
    files = stage_files(vdir) if vdir is not None and vdir.is_dir() else []
    if ev := v.result(EvaluateResult):
        files.append((ev.results_file, "lm_eval"))
        files += [(f, "lm_eval/samples") for f in ev.samples_files.values()]
    if b := v.result(BenchmarkResult):
        out = Path(b.server_log).parent  # the stage's folder, variants/<name>/<folder>/: its files go
        folder = out.name  # to an artifact folder of that name (outputs never import the stage registry)
        for p in b.points:
            files += [(r.get("result_file"), folder) for r in p.repetitions] or [(p.result_file, folder)]
        files.append((b.server_log, folder))
        files += [(str(f), folder) for f in sorted(out.glob("bench-slo-*.json"))]
        files.append((str(out / "offline.json"), folder))
        files += [(str(f), f"{folder}/monitor") for f in monitor_files(out)]
    if q := v.result(QuantizeResult):
        files.append((str(Path(q.checkpoint) / "provenance.json"), "checkpoint"))
        files.append((str(Path(q.checkpoint) / "config.json"), "checkpoint"))
    return files
