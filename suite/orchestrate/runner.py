"""The runner: the job loop of one run (each stage job a process of its own), then the run's outputs.

Data flows one way: recipe -> plan (suite.plan) -> stage results (JSON files in the run folder) and run.json (what
the job loop knew: errors, warnings, versions) -> the summary (suite.analysis.derive.summarize, from the folder) ->
summary.json, frontier.png, report.html, MLflow (suite.outputs.publish).
A failed stage does not stop the run: the variant records the error (and its log's tail), its later
stages are skipped, and the other variants go on.

Run folder layout (``<output_dir>/<timestamp>-<recipe>[-N]/``, suite.orchestrate.rundir):
  recipe.yaml, plan.json, jobs.json, run.json, summary.json, report.html, frontier.png (when a variant has both an accuracy
  and a throughput figure), run.lock (while a run of it is alive: suite.runtime.lock)
  variants/<name>/{quantize,evaluate,benchmark}.{config.json,result.json,log}
  variants/<name>/evaluate/  lm_eval results and samples (lm-eval's own file names)
  variants/<name>/benchmark/ bench-<point>.json, server.log
Quantized checkpoints live in ``<output_dir>/checkpoints/<scheme>[-kv]-<key>/`` (named by content: two
variants with the same quantization share one) and are reused across runs; finished evaluations in
``<output_dir>/eval-cache/<key>/``.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from suite.analysis import derive
from suite.orchestrate import jobs, progress, rundir, store_seal, tracking
from suite.orchestrate.executors import JobCall, make_executor
from suite.plan import results
from suite.outputs.publish import now, publish

if TYPE_CHECKING:
    from suite.records.summary import RunSummary


# (stage, variant, event[, where]) with event in start|ok|failed|skipped|resumed|cached; 'start' also says
# where the job runs (the executor's placement: "GPU 0 (0.25)", "CPU", a Ray node). ("run", "", "note", line): a line
# to show as it is (a baseline reused from the store). Also ("run", "", "started",
# run folder) once plan.json is written, before any job, and (stage, variant, "progress", StageProgress) while a
# job runs (suite.orchestrate.progress: the counts its stage process writes), and (stage, variant, "scores",
# [TaskScore]) right after the 'ok' / 'cached' / 'resumed' of a job whose result scores the variant
Reporter = Callable[..., None]
Watcher = Callable[[list, list], None]  # (running [(Job, placement)], queued [Job]): on every pass of the job loop


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during a run, once its stage processes are stopped and its lock released: ``run_dir`` is
    the folder a ``suite run --resume`` continues."""

    def __init__(self, run_dir: Path):
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def execute(loaded: "rundir.LoadedRecipe", out_root: Path | None = None, report: Reporter | None = None,
            track: bool = True, force: bool = False, resume: Path | None = None,
            watch: Watcher | None = None, accept_recipe_change: bool = False) -> "RunSummary":
    """Run a recipe's plan in a new run folder, or with ``resume`` continue the run in that folder: stage
    results already there are kept (event 'resumed'), the other jobs run. The folder is locked
    (``run.lock``) for as long as this runs: a resume refuses while a run of it, or a stage of one, is alive.
    A resume keeps what the run promised at its start (rundir.record_start): it honours the start's --force, and
    refuses a run folder whose recipe.yaml changed since, unless ``accept_recipe_change`` (then recorded in the
    summary). Ctrl-C raises RunInterrupted once the stage processes are stopped and the lock released."""
    report = report or (lambda *event: None)
    if resume:
        run_dir = resume.resolve()
        out_root = out_root or run_dir.parent  # where its checkpoints/ and eval-cache/ are
    else:
        out_root = out_root or loaded.resolve(loaded.recipe.output_dir)
        run_dir = rundir.new_run_dir(loaded, out_root)
    lock = rundir.acquire_run_lock(run_dir)
    try:
        changed = None
        if not resume:
            # the recipe that runs: the file's text, or the text `--set` / the API's overrides made (its sha256 recorded)
            (run_dir / "recipe.yaml").write_bytes(loaded.text.encode())
            rundir.record_start(run_dir, loaded, force)
        else:
            force = force or bool(rundir.started_with(run_dir).get("force"))
            changed = rundir.recipe_changes(run_dir, loaded)
            if changed and not accept_recipe_change:
                raise rundir.refuse_recipe_change(run_dir, changed)
        return _execute(loaded, run_dir, out_root, lock, report, track, force, resume, watch, changed or [])
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir) from None
    finally:
        lock.release()


def _execute(loaded: "rundir.LoadedRecipe", run_dir: Path, out_root: Path, lock, report: Reporter, track: bool, force: bool,
             resume: Path | None, watch: Watcher | None = None,
             recipe_changed: list[str] | None = None) -> "RunSummary":
    plan, expected, env = rundir.prepare(loaded, run_dir, out_root, resume is not None)
    report("run", "", "started", str(run_dir))  # the folder, its logs, where it is tracked: before any stage
    jobs.forget_facts(run_dir)  # an earlier attempt's run.json: written again when this one's job loop ends
    store = store_seal.CompileStore(env, lambda line: report("run", "", "note", line), f"{os.getpid()}@"
                                    f"{socket.gethostname()} {run_dir}")
    live = None
    try:
        refused = store.check()  # held until sealed; with SUITE_MANIFEST_KEY, compile folders whose seal fails go
        if store.waited_s >= 1:
            refused.append(f"waited {store.waited_s:.0f} s for {store.path}: another run was using the compile store")
        quantizes = plan.quantizes
        summary = rundir.opening_summary(loaded, plan, run_dir, resume is not None, now(), quantizes)
        if recipe_changed:
            summary.recipe_changed_on_resume = list(recipe_changed)
            summary.warnings.append(f"resumed with --accept-recipe-change: recipe.yaml differs from the one the run "
                                    f"began with in {', '.join(recipe_changed)}")
        summary.warnings.extend(refused)
        if lock.taken_over:
            t = lock.taken_over
            summary.warnings.append(f"took over the run lock of `suite run` pid {t.get('pid')} on {t.get('host')} "
                                    "(no longer running here); results its stages may still write are refused")
        live = tracking.live(summary, loaded, run_dir, out_root, on=track and resume is None)  # MLflow runs RUNNING now
        if live.url:
            report("run", "", "tracking", live.url)
        with progress.watching(run_dir, report):  # the stages' progress records -> report(stage, variant, "progress", count)
            try:
                totals = schedule(plan, summary, expected, plan.executor, run_dir, out_root, env, force, lock,
                                  live.hear(report), watch)
            finally:  # what this run's engines compiled, sealed for the next run (with SUITE_MANIFEST_KEY)
                try:
                    store.seal()
                finally:
                    store.release()
        # what the job loop knows that the results do not say goes into the folder (run.json); the closing summary
        # is the folder's (derive.summarize), as `suite summarize` and `suite gate` make it
        finished = now()
        jobs.write_facts(run_dir, summary, quantizes, totals, finished)
        summary = publish(derive.summarize(run_dir), run_dir, out_root, track, resumed=resume is not None,
                          report=report, end_times=live.end_ms, finished=finished, signs=True)
    except BaseException:
        if live is not None:
            live.abort()
        raise
    finally:
        store.release()
    return summary


def schedule(plan, summary, expected: dict, spec, run_dir: Path, out_root: Path, env: dict[str, str], force: bool,
             lock, report: Reporter, watch: Watcher | None = None) -> dict[str, float]:
    """Run the plan's DAG on the executor ``spec`` asks for: a job is looked up in the store when every job it waits
    for has succeeded (skipped, with the reason, when one failed), and sent to the executor, which starts it when it
    fits, only when that misses (``expected``: the hits a resume's look before anything ran found). Writes
    ``jobs.json`` (where and when each job ran, the executor's overhead); returns each stage's total wall time."""
    loop = JobLoop(plan, summary, expected, make_executor(spec), report, env,
                   lambda job, vp, done: JobCall.of_stage(job.stage, vp, done, run_dir, out_root, env, force, lock),
                   lambda job, done: jobs.look_up(job.stage, loop.plans[job.variant], done, run_dir, out_root, env, force,
                                                lock))
    executor, t0, checked = loop.executor, time.time(), False
    try:
        executor.start()
        loop.refuse_at_start()
        while loop.pending or executor.running():
            if not loop.quantize_left and not checked:  # every checkpoint exists now: same prompts for all?
                summary.warnings += jobs.preflight(summary.variants)
                checked = True
            progressed = loop.send_ready()
            if watch is not None:
                watch(executor.running(), list(loop.pending))
            if not executor.running():
                if loop.pending and not progressed:  # nothing runs, nothing changed: these can never start
                    raise RuntimeError(f"jobs that cannot start: {', '.join(j.id for j in loop.pending)}")
                continue  # something became ready (a kept result, a skip): look again
            for f in executor.wait():
                loop.finished(f, t0)
    finally:
        for name, why in loop.refusals.items():  # first: the cause, before what followed from it
            loop.by_name[name].errors.insert(0, why)
        executor.close()
        jobs.write_timeline(run_dir / "jobs.json", executor, plan, loop.timeline, t0)
    return loop.totals


class JobLoop:
    """One run's job loop as it stands: the jobs still pending, what each settled one came to (``state``: job id ->
    ok | failed | skipped), the variants' summaries and plans, each stage's total time and the timeline. ``call``:
    (job, the variant's plan as the job runs it, its summary) -> the executor's JobCall; ``look_up``: (job, its
    variant's summary) -> what the store holds for it (``store.Found``); ``expected``: the hits a resume expects."""

    def __init__(self, plan, summary, expected: dict, executor, report: Reporter, env: dict[str, str], call, look_up):
        self.plan, self.summary, self.expected, self.executor, self.report, self.env, self.call = (
            plan, summary, expected, executor, report, env, call)
        self.look_up = look_up
        self.earlier: dict[str, object] = {}  # job id -> the run folder's checkpoint result its lookup did not take
        self.by_name = {v.name: v for v in summary.variants}
        self.plans = {vp.variant.name: vp for vp in plan.variants}
        self.totals: dict[str, float] = {}
        self.state: dict[str, str] = {}
        self.refusals: dict[str, str] = {}  # variant -> why its first job refused at the start can never run here
        self.pending = jobs.stage_jobs(plan)
        self.quantize_left = {j.id for j in self.pending if jobs.builds_checkpoint(j.stage)}  # still to build
        self.timeline: list[dict] = []

    def settle(self, job, state: str, event: str) -> None:
        """``job`` ends here without being sent: ``state`` recorded, ``event`` reported."""
        self.pending.remove(job)
        self.state[job.id] = state
        self.quantize_left.discard(job.id)
        self.report(job.stage, job.variant, event)

    def refuse_at_start(self) -> None:
        """Before anything runs, not once its inputs exist. Kept apart from the variant's errors until the end: an
        error skips every later job of its variant, and the variant's other jobs (kept results of a resumed run, a
        checkpoint another variant builds on) must still run."""
        for job, why in refused_at_start(self.pending, self.expected, self.executor):
            self.refusals.setdefault(job.variant, f"{job.stage} not run: {why}")
            self.settle(job, "skipped", "skipped")

    def send_ready(self) -> bool:
        """Each pending job whose dependencies are settled: taken from the store when its lookup hits (the run
        folder's result: 'resumed'; a shared store's: 'cached'), skipped, or sent to the executor with the variant's
        plan as it runs it (jobs.ready_plan: what a prerequisite stage chose passed on). Whether anything moved."""
        progressed = False
        for job in self.executor.order([j for j in self.pending if all(d in self.state for d in j.deps)]):
            vs = self.by_name[job.variant]
            failed_dep = next((d for d in job.deps if self.state[d] != "ok"), None)
            if not failed_dep and not vs.errors and (found := self.looked_up(job, vs)).result is not None:
                self.take(job, vs, found)
            elif failed_dep or vs.errors or (why := self.executor.never_fits(job)):
                if not vs.errors:
                    why = f"{failed_dep} did not succeed" if failed_dep else why
                    vs.errors.append(f"{job.stage} not run: {why}")
                self.settle(job, "skipped", "skipped")
            elif self.executor.submit(job, self.call(job, jobs.ready_plan(self.plans[job.variant], job.stage, vs.stages),
                                                     dict(vs.stages))):
                self.pending.remove(job)
                where = dict((j.id, p) for j, p in self.executor.running()).get(job.id, "")
                self.report(job.stage, job.variant, "start", where)
            else:
                continue  # does not fit now
            progressed = True
        return progressed

    def looked_up(self, job, vs):
        """The job's lookup (``store.Found``); a miss of a result the run folder held (a resume) says why it runs
        again (jobs.miss_note), and a checkpoint's is kept until the checkpoint is there again (jobs.checkpoint_note)."""
        found = self.look_up(job, vs.stages)
        if found.earlier is not None:
            self.summary.warnings += jobs.miss_note(job.stage, job.variant, found, self.plans[job.variant])
            if jobs.builds_checkpoint(job.stage):
                self.earlier[job.id] = found.earlier
        return found

    def take(self, job, vs, found) -> None:
        """A hit as the job's result: into its variant's summary, its recorded time into the totals; a shared store's
        for the baseline's evaluation said once ('reused from')."""
        results.record(vs, job.stage, found.result, self.plans[job.variant])
        self.totals[job.stage] = self.totals.get(job.stage, 0.0) + getattr(found.result, "wall_s", 0.0)
        if jobs.builds_checkpoint(job.stage) and job.id in self.earlier:
            self.summary.warnings += jobs.checkpoint_note(self.earlier.pop(job.id), found.result, job.variant,
                                                          self.plan)
        self.settle(job, "ok", "resumed" if found.where == "run" else "cached")
        self.tell_scores(job, found.result)
        if note := jobs.reuse_note(job.stage, found, vs, self.env):
            self.report("run", "", "note", note)

    def finished(self, f, t0: float) -> None:
        """A job the executor ran: its outcome into its variant's summary (a rebuilt checkpoint compared with the
        one the run used), its time into the totals and the timeline."""
        job, outcome = f.job, f.outcome
        vs = self.by_name[job.variant]
        self.timeline.append(f.as_dict(t0))
        self.totals[job.stage] = self.totals.get(job.stage, 0.0) + outcome.wall_s
        self.quantize_left.discard(job.id)
        if outcome.note:
            self.summary.warnings.append(f"{job.variant}: {outcome.note}")
        if outcome.error:
            vs.errors.append(outcome.error)
            self.state[job.id] = "failed"
            self.report(job.stage, job.variant, "failed")
            return
        results.record(vs, job.stage, outcome.result, self.plans[job.variant])
        if jobs.builds_checkpoint(job.stage) and job.id in self.earlier:
            self.summary.warnings += jobs.checkpoint_note(self.earlier.pop(job.id), outcome.result, job.variant,
                                                          self.plan)
        self.state[job.id] = "ok"
        self.report(job.stage, job.variant, "cached" if getattr(outcome.result, "cache_hit", False) else "ok")
        self.tell_scores(job, outcome.result)

    def tell_scores(self, job, result) -> None:
        """The scores a result gives its variant (an evaluation's, a served benchmark's), reported the moment it
        lands (event 'scores'), so that the first number is seen when its job ends, not at the run's end."""
        evaluation = results.evaluation_of(job.stage, result, self.plans[job.variant])
        if evaluation is not None and evaluation.scores:
            self.report(job.stage, job.variant, "scores", list(evaluation.scores))


def refused_at_start(pending: list, expected: dict, executor) -> list[tuple]:
    """(job, why) for each job the executor can never hold (``never_fits``: more GPUs, CPUs or memory than any node
    has), then for each job that only feeds such jobs (a quantize whose every user never fits: its checkpoint would
    be built for nothing), each group in DAG order, so that a variant's first error names the cause. A job a resume
    expects to find in its run folder (``expected``) is not refused."""
    direct = {j.id: (j, why) for j in pending
              if (j.stage, j.variant) not in expected and (why := executor.never_fits(j))}
    derived: dict[str, tuple] = {}
    for job in reversed(pending) if direct else ():  # later jobs first: a job's users come after it in the DAG
        users = [j for j in pending if job.id in j.deps]
        if job.id in direct or (job.stage, job.variant) in expected or not users:
            continue
        if all(u.id in direct or u.id in derived for u in users):
            derived[job.id] = (job, f"every job that needs it cannot run here ({', '.join(u.id for u in users)})")
    return [direct[j.id] for j in pending if j.id in direct] + [derived[j.id] for j in pending if j.id in derived]
