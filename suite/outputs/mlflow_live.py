"""MLflow while a run works: its runs created RUNNING when it starts, each stage's metrics logged as the stage ends.

``LiveTracking(summary, loaded, run_dir, out_root)`` opens the run's MLflow target (``suite.outputs.tracking_target``)
when the run starts: a parent run (start_time: now) and a nested run per variant, all RUNNING, each variant run
with its evaluation data as datasets (``datasets``: suite.orchestrate.tracking.task_datasets, context "eval"). ``hear`` wraps the
runner's reporter: a job's "start" event stamps the stage's start; its end ("ok", "cached", "failed") logs
``time.<stage>_s`` and every metric of the variant that is new or changed (``variant_metrics``: accuracy after
evaluate, throughput after benchmark), stamped with the stage's end, and tags ``stage.<stage>.started`` /
``.ended`` / ``.status``. The end of the run (``suite.outputs.mlflow.run``) finds these runs by their run folder
tag, logs the rest and closes them FINISHED or FAILED, each variant's end_time its last stage's end (``end_ms``).

Offline first: a server that does not answer at the start, or a call that fails later, turns live logging off for
the rest of the run (the reason in ``off``); the run goes on, and the end of the run logs it all, or leaves it for
``suite sync``. A resumed run (``suite run --resume``) is logged at its end only, as before.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from suite.analysis.summary import headline_rule, variant_metrics
from suite.outputs import mlflow
from suite.outputs.mlflow_http import unreachable

ENDS = ("ok", "cached", "failed")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


class LiveTracking:
    def __init__(self, summary, loaded, run_dir: Path, out_root: Path, on: bool = True,
                 datasets: list[tuple[str, str, str]] | None = None):
        self.summary, self.rule = summary, headline_rule(loaded.recipe)
        self.client = None
        self.off: str | None = None if on else "tracking off"
        self.parent_id: str | None = None
        self.url: str | None = None  # where the parent run is shown (the UI's page for an http(s) tracking server)
        self.run_ids: dict[str, str] = {}
        self.started: dict[tuple[str, str], float] = {}
        self.logged: dict[str, dict[str, float]] = {}
        self.end_ms: dict[str, int] = {}
        if on:
            self._guard(self._open, run_dir, out_root, datasets or [])

    def _guard(self, fn, *args) -> None:
        """Run ``fn``; any failure turns live logging off (the end of the run logs everything, or defers it)."""
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - MLflow trouble never stops a run
            self.client, self.off = None, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            self.summary.warnings.append(f"MLflow live logging stopped ({self.off}); the run is logged at its end, "
                                         "or kept for `suite sync`")

    def _open(self, run_dir: Path, out_root: Path, datasets: list[tuple[str, str, str]]) -> None:
        config = mlflow.track_config(self.summary, run_dir / "summary.json", out_root)
        why = unreachable(config.uri)
        if why:
            self.off = why
            return
        client, exp_id = mlflow.open_store(config)
        now_ms = int(time.time() * 1000)
        self.parent_id = mlflow.create_parent(client, exp_id, self.summary, start_time=now_ms)
        base = config.uri.rstrip("/")
        self.url = (f"{base}/#/experiments/{exp_id}/runs/{self.parent_id}" if base.startswith(("http://", "https://"))
                    else f"{base} experiment {exp_id} run {self.parent_id}")
        for v in self.summary.variants:
            self.run_ids[v.name] = mlflow.create_child(client, exp_id, self.parent_id, self.summary, v, start_time=now_ms)
            mlflow.log_datasets(client, self.run_ids[v.name], datasets)
        self.client = client

    def hear(self, report):
        """The runner's reporter, with each job's start and end also told to MLflow."""
        def reporter(stage, variant, event, *rest):
            report(stage, variant, event, *rest)
            if self.client is not None and variant in self.run_ids:
                self._guard(self._event, stage, variant, event)
        return reporter

    def _event(self, stage: str, variant: str, event: str) -> None:
        now = time.time()
        run_id = self.run_ids[variant]
        if event == "start":
            self.started[stage, variant] = now
            mlflow.log_now(self.client, run_id, {}, {f"stage.{stage}.started": _iso(now)}, int(now * 1000))
            return
        if event not in ENDS:
            return
        began = self.started.pop((stage, variant), None)
        v = next(x for x in self.summary.variants if x.name == variant)
        seen = self.logged.setdefault(variant, {})
        metrics = {k: val for k, val in variant_metrics(v, self.rule).items() if seen.get(k) != val}
        if began is not None:
            metrics[f"time.{stage}_s"] = now - began
        seen.update(metrics)
        self.end_ms[variant] = int(now * 1000)
        mlflow.log_now(self.client, run_id, metrics, {f"stage.{stage}.ended": _iso(now), f"stage.{stage}.status": event},
                       self.end_ms[variant])

    def abort(self) -> None:
        """The run broke off (an exception, Ctrl-C): its MLflow runs are closed FAILED."""
        if self.client is None:
            return
        for run_id in [*self.run_ids.values(), self.parent_id]:
            self._guard(self.client.set_terminated, run_id, "FAILED")
