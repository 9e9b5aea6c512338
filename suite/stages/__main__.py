"""Stage process entry: ``python -m suite.stages <stage> <config.json> <result.json>`` (stages from the registry).

Each stage runs in a process of its own (GPU memory is only truly freed when a process ends, and the
quantize stage lives in a different environment). The parent never imports vLLM, lm-eval or torch.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from suite.stages.registry import STAGES

    if len(argv) != 3 or argv[0] not in STAGES:
        print(f"usage: python -m suite.stages {{{','.join(STAGES)}}} CONFIG.json RESULT.json", file=sys.stderr)
        return 2
    name, cfg_path, out_path = argv
    spec = STAGES[name]
    config = spec.config.read(Path(cfg_path))
    close = spec.load_close()
    try:
        result = spec.load_entry()(config)
    except Exception:
        if close is None:
            raise
        import traceback

        traceback.print_exc()  # the cause, as an uncaught exception prints it; then no teardown to hang or abort in
        end_without_teardown(close, code=1)
    from suite.orchestrate.lock import result_allowed

    if refused := result_allowed():  # an orphan of a lost run must not overwrite a result accepted since
        print(f"RuntimeError: result not written: {refused}", file=sys.stderr)
        if close is not None:
            end_without_teardown(close, code=3)
        return 3
    result.write(Path(out_path))
    if close is not None:
        end_without_teardown(close)
    return 0


def end_without_teardown(close, code: int = 0, timeout_s: float = 60.0) -> None:
    """Once the stage is done (its result written, or its error printed): ``close()`` (the stage shuts down what it
    started, e.g. its engine), then end the process with ``code`` without the interpreter's teardown (atexit hooks,
    thread joins, native destructors). A failure, an abort or a hang (``timeout_s``) in either comes after the
    result, so it cannot lose it; the log says what happened. A hang that holds the interpreter lock is ended by
    faulthandler's own thread 30 s later (exit 1, every thread's stack in the log). Whatever the stage left running
    is killed by its supervisor (``suite.orchestrate.procs``) when this ends."""
    import faulthandler
    import os
    import threading

    def run_close():
        try:
            close()
        except BaseException as exc:  # noqa: BLE001 -- reported, not fatal: the stage is done
            print(f"warning: the stage's close() failed after the stage ended: {type(exc).__name__}: {exc}",
                  file=sys.stderr)

    faulthandler.dump_traceback_later(timeout_s + 30, exit=True)
    closer = threading.Thread(target=run_close, name="stage-close", daemon=True)
    closer.start()
    closer.join(timeout_s)
    if closer.is_alive():
        print(f"warning: the stage's close() had not returned after {timeout_s:.0f} s; ending without it; where "
              "each thread was:", file=sys.stderr)
        faulthandler.dump_traceback(all_threads=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
