"""Stage process entry: ``python -m suite.stages <stage> <config.json> <result.json>`` (stages from the registry).

The registry reads the ``suite.stages`` entry points of this interpreter's path, so a stage a package outside
``suite`` adds runs here as the built-in ones do.

Each stage runs in a process of its own (GPU memory is only truly freed when a process ends, and the
quantize stage lives in a different environment). The parent never imports vLLM, lm-eval or torch.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from suite.records.base import JOB_ENV, JobStamp
from suite.records.registry import RegistryError
from suite.runtime import progress, safeio, stacks
from suite.runtime.lock import result_allowed
from suite.stages.registry import STAGES

LOG_FORMAT = "%(asctime)s {stage} %(levelname)s %(name)s: %(message)s"
# This module runs as ``__main__`` (``python -m suite.stages``): its logger is named for the package's module, so that
# its records reach the ``suite`` logger's handler.
log = logging.getLogger("suite.stages.__main__")


def setup_logging(stage: str, stream=None) -> logging.Handler:
    """The stage process's one logging handler: the ``suite`` logger's records (a stage module logs through
    ``logging.getLogger(__name__)``) go to stderr, which is the stage's log file, with the time and the stage's
    name. Only the ``suite`` logger: vLLM's, lm-eval's and transformers' own logging is left as it is."""
    logger = logging.getLogger("suite")
    for old in [h for h in logger.handlers if getattr(h, "suite_stage_handler", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT.format(stage=stage), datefmt="%H:%M:%S"))
    handler.suite_stage_handler = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def main(argv: list[str]) -> int:
    spec, refused = _spec(argv)
    if spec is None:  # before any handler (the stage is not known yet): a command-line error, on stderr
        sys.stderr.write(refused)
        return 2
    name, cfg_path, out_path = argv
    setup_logging(name)
    _start_sampling(stacks_path(Path(out_path)))
    _start_progress(Path(out_path))
    try:
        config = spec.config.read(Path(cfg_path))
        close = spec.load_close()
        try:
            result = spec.load_entry()(config)
        except Exception:
            if close is None:
                raise
            import traceback

            _finish_sampling()  # before the traceback, which stays the log's last lines
            traceback.print_exc()  # the cause, as an uncaught exception prints it; then no teardown to hang or abort in
            end_without_teardown(close, code=1)
        if refused := result_allowed():  # an orphan of a lost run must not overwrite a result accepted since
            # written bare, not through the handler: an exception's line, which the parent reports as the
            # stage's failure (suite.runtime.procs.error_line matches it only at the start of a line)
            sys.stderr.write(f"RuntimeError: result not written: {refused}\n")
            if close is not None:
                end_without_teardown(close, code=3)
            return 3
        stamped(result, name, Path(cfg_path)).write(Path(out_path))
        if close is not None:
            end_without_teardown(close)
        return 0
    finally:  # (end_without_teardown ends the process itself, after the same)
        _finish_sampling()


def stamped(result, stage: str, cfg_path: Path):
    """``result`` with the job that made it (``records.base.JobStamp``: the variant and content key the parent named in
    ``SUITE_JOB``, this stage, the sha256 of the config file it read) and that key in its own key field, so that the
    one atomic write of the result carries them (a parent killed after it cannot leave a result without its key).
    Unchanged when no job was named (a stage run by hand) or its result type has no ``job`` field."""
    named = os.environ.get(JOB_ENV)
    fields = type(result).model_fields
    if not named or "job" not in fields:
        return result
    job = safeio.loads_json(named, JOB_ENV, "state")  # the parent's small JSON, its nesting bounded all the same
    key = job.get("key")
    stamp = JobStamp(variant=job["variant"], stage=stage, key=key, config_sha256=safeio.sha256(cfg_path, "record"))
    update = {"job": stamp, **{f: key for f in ("key", "cache_key") if f in fields and key}}
    return result.model_copy(update=update)


def _spec(argv: list[str]):
    """(the StageSpec argv names, None), or (None, the line to write): the usage, as argparse writes one, or a plug-in
    stage whose entry point does not load (its one line, which the parent reports as the stage's error)."""
    try:
        if len(argv) == 3 and argv[0] in STAGES:
            return STAGES[argv[0]], None
        return None, f"usage: python -m suite.stages {{{','.join(STAGES)}}} CONFIG.json RESULT.json\n"
    except RegistryError as exc:
        return None, f"RegistryError: {exc}\n"


def stacks_path(result_path: Path) -> Path:
    """Where a stage's stack profile goes: ``evaluate.result.json`` -> ``evaluate.stacks.json`` beside it."""
    name = result_path.name
    stem = name[:-len("result.json")] if name.endswith("result.json") else name + "."
    return result_path.with_name(stem + "stacks.json")


def _start_progress(result_path: Path) -> None:
    """Name this stage's progress file (suite.runtime.progress) for the stage's code; an earlier attempt's goes."""
    import os

    path = progress.path_for(result_path)
    if _may_write():
        path.unlink(missing_ok=True)
    os.environ[progress.ENV] = str(path)


_sampling: list = []  # [(StackSampler, path)] while this stage process samples its main thread


def _start_sampling(path: Path) -> None:
    """Sample the main thread's stack for the whole stage (suite.runtime.stacks), unless SUITE_STACK_SAMPLING=0.
    A profile of an earlier attempt is removed first. Never fails the stage: without a sampler it runs as before."""
    import os

    try:
        if _may_write():
            path.unlink(missing_ok=True)
        if os.environ.get(stacks.ENV, "1") != "0":
            _sampling.append((stacks.StackSampler(path=path, may_write=_may_write).start(), path))
    except Exception as exc:  # noqa: BLE001 -- e.g. no thread to be had under a pids limit
        log.warning("no stack profile for this stage (%s): %s: %s", path, type(exc).__name__, exc)


def _may_write() -> bool:
    """Whether this stage may still write into its run folder (suite.runtime.lock: not if the run was taken over
    by another, whose files these would overwrite)."""
    return not result_allowed()


def _follow(thread_id: int | None) -> None:
    """Sample ``thread_id`` from now on (the close() thread, while the main thread only waits for it)."""
    for sampler, _ in _sampling:
        sampler.follow(thread_id)


def _finish_sampling() -> None:
    """Stop the sampler, write its profile beside the result and end the log with where the time went. Never fails
    the stage: a profile that cannot be written is a warning. Nothing is written into a run folder taken over (an
    orphan's result is refused the same way)."""
    if not _sampling:
        return
    sampler, path = _sampling.pop()
    sampler.stop()
    try:
        if not _may_write():
            return
        data = sampler.write(path)
        if data["samples"]:
            log.info("%s", stacks.report(data))
    except Exception as exc:  # noqa: BLE001 -- the stage's own outcome stands
        log.warning("the stage's stack profile was not written (%s): %s: %s", path, type(exc).__name__, exc)


def end_without_teardown(close, code: int = 0, timeout_s: float = 60.0) -> None:
    """Once the stage is done (its result written, or its error printed): ``close()`` (the stage shuts down what it
    started, e.g. its engine), then end the process with ``code`` without the interpreter's teardown (atexit hooks,
    thread joins, native destructors). A failure, an abort or a hang (``timeout_s``) in either comes after the
    result, so it cannot lose it; the log says what happened. A hang that holds the interpreter lock is ended by
    faulthandler's own thread 30 s later (exit 1, every thread's stack in the log). Whatever the stage left running
    is killed by its supervisor (``suite.runtime.procs``) when this ends."""
    import faulthandler
    import os
    import threading

    def run_close():
        try:
            close()
        except BaseException as exc:  # noqa: BLE001 -- reported, not fatal: the stage is done
            log.warning("the stage's close() failed after the stage ended: %s: %s", type(exc).__name__, exc)

    faulthandler.dump_traceback_later(timeout_s + 30, exit=True)
    closer = threading.Thread(target=run_close, name="stage-close", daemon=True)
    closer.start()
    _follow(closer.ident)
    closer.join(timeout_s)
    if closer.is_alive():
        log.warning("the stage's close() had not returned after %.0f s; ending without it; where each thread was:",
                    timeout_s)
        faulthandler.dump_traceback(all_threads=True)
    _finish_sampling()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
