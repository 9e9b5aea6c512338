"""The compile store: vLLM's compilation caches kept by the suite, one folder per engine configuration's content key.

vLLM compiles the model with torch.compile (Inductor, Triton kernels) at each engine start and caches what it made
under ``VLLM_CACHE_ROOT/torch_compile_cache/<hash>/`` (vLLM puts Inductor's and Triton's caches beside it unless
``TRITON_CACHE_DIR`` is given; ``vllm/compilation/compiler_interface.py``). By default that is ``~/.cache/vllm``: one
folder on one machine, gone with a fresh CI runner. Here every stage that starts an engine points ``VLLM_CACHE_ROOT``
at ``<store>/compile-cache/<key>/`` and the JIT caches, ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR`` and
FlashInfer's ``FLASHINFER_WORKSPACE_BASE``, at ``<store>/compile-cache/jit-<jit key>/`` (``use``), ``<store>`` being
the run's store (``SUITE_STORE`` in the stage's environment, set by the runner: the recipe's ``store:``, the
``SUITE_STORE`` setting, else the output folder). The key (``compile_key``) hashes what decides the compiled code:
vLLM's and torch's versions, the GPU's name, the model's config.json, dtype, KV-cache dtype, max_model_len, the
batch-invariant switch and every engine argument but those that only size memory or name ports and seeds
(``NOT_COMPILE_ARGS``). So a CI runner that restores the store starts warm, and BF16 and FP8 builds never share or
evict each other's folder; vLLM's own hash inside the folder still decides what it may reuse, so a key that is too
coarse costs a compile, never a wrong kernel.

The JIT folder is one for every configuration of a GPU and a vLLM/torch/FlashInfer build (``jit_key``): FlashInfer's
kernels (the sampler's, which every vLLM engine on a GPU builds on first use, 95–136 s on a fresh H100 or H200),
Triton's and Inductor's are keyed inside their caches by their own source and parameters, not by the model, so a
per-configuration folder only built the same kernels once per configuration: a new FP8 build with a new config.json
paid them again. Inductor's folder holds what torch.compile builds outside vLLM's compile of the model: vLLM points
``TORCHINDUCTOR_CACHE_DIR`` at a folder under ``VLLM_CACHE_ROOT`` when it compiles the model, for the rest of the
process (``vllm/compilation/compiler_interface.py``, ``decorators.py``), so what lands here is what is compiled
before that, and with ``enforce_eager`` (the CPU demo's engines) all of it: the ops vLLM compiles on their own (the
logprob ranks of a loglikelihood request) and, on CPU, Inductor's probes of the vector instructions. Two
configurations built byte-for-byte the same C++ there, 10-16 s each on 2 cores.
The libraries write their caches safely beside a concurrent writer (FlashInfer builds each module under a file
lock, and in a folder of its own since flashinfer PR #2339 of January 2026: before, concurrent builds of different
modules shared one ninja log; vLLM 0.26 requires FlashInfer 0.6.14. Triton renames each finished file into place),
so engines of one run starting side by side share the folder; the store must be on a local filesystem
(FlashInfer's file locks fail on NFS). It also keeps
vLLM's model-class facts (``$VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json``, checked by vLLM against its model
module's hash): without one, vLLM inspects the model class in a subprocess that imports vLLM again (8.7-10 s a start
on 2 CPU cores), and ``VLLM_CACHE_ROOT`` being the configuration's folder, every new configuration paid it. vLLM reads
them only from ``VLLM_CACHE_ROOT``, so ``use`` copies the shared ones into the configuration's folder before a start
and ``mark_complete`` copies new ones back after it (small JSON files read with a bound, written to fresh temporary
files; links are neither read nor written through; a failed copy is a warning).

A start is ``warm`` when its key's folder was marked complete (``mark_complete``: after an earlier start of that
configuration came up) before it began, else ``cold``; the ledger (suite.records.engine.EngineStart) records which.

No separate warm-up start before a measured one: the throughput is measured after the server is ready, so a cold
start costs its compile once and the next run of that configuration starts warm from the store; a warm-up start
would cost a whole engine start (weights, CUDA graphs, KV cache) on every cold configuration to save only the
compile part of the measured one. What a cold start can change is the KV capacity (vLLM issue #54122: a first
start profiles less free memory); the ledger records each start's KV-cache tokens and the summary flags two starts
of one configuration whose capacity differs (suite.analysis.ledger), which is when a warm-up would matter; with
vLLM 0.26 on an H100 a cold start's KV cache is smaller by well under 1%, so the choice stands.

With ``SUITE_MANIFEST_KEY`` the parent seals each key folder after a run and checks it before the next
(suite.orchestrate.store_seal): the stage processes that fill it never hold the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from suite.records.evaluate import EngineConfig
from suite.runtime import atomic, safeio
from suite.runtime.errors import SuiteError

log = logging.getLogger(__name__)

STORE_ENV = "SUITE_STORE"  # the run's store folder, in a stage's environment (suite.runtime.settings documents it)
COMPILE_DIR = "compile-cache"
COMPLETE = ".complete"  # written in a key's folder once an engine of that configuration came up
# engine arguments that size memory, name ports or seed sampling: they do not change the compiled code
NOT_COMPILE_ARGS = frozenset({
    "gpu_memory_utilization", "kv_cache_memory_bytes", "swap_space", "cpu_offload_gb", "seed", "disable_log_stats",
    "api_server_count", "enable_log_requests", "disable_log_requests", "max_log_len", "num_gpu_blocks_override",
})
# each cache's variable and its sub-folder: the configuration's own (vLLM's compiled graphs of the model) ...
CACHE_VARS = {"VLLM_CACHE_ROOT": "vllm"}
# ... and the JIT kernels every configuration of one build shares; FlashInfer keeps its JIT-built kernels (vLLM's
# sampler on a GPU) under $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer, by default in the home folder
JIT_VARS = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "FLASHINFER_WORKSPACE_BASE": "flashinfer"}
JIT_PREFIX = "jit-"  # a JIT folder's name: jit-<jit_key>
MODELINFO = "modelinfos"  # vLLM's model-class facts, under VLLM_CACHE_ROOT and, shared, in the JIT folder
MAX_MODELINFOS = 256  # files copied a start (vLLM writes one per model class started)
MAX_MODELINFO_BYTES = 1 << 16  # one is ~1 KB of JSON


def gpu_name() -> str:
    """The first GPU's name from NVML, else ``cpu-<machine>`` (no NVIDIA driver, GPU or nvidia-ml-py)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - ImportError or NVMLError: no NVIDIA GPU here
        return f"cpu-{platform.machine()}"
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return f"cpu-{platform.machine()}"
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except pynvml.NVMLError:
        return f"cpu-{platform.machine()}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down what may not have started
            pass


def _model_config_sha(model: str) -> str:
    """sha256 of the model folder's config.json (what shapes the graph); a hub id or a folder without one: the id."""
    config = Path(model) / "config.json"
    return safeio.sha256(config, "model_config") if config.is_file() else model


def _digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def compile_key(engine: EngineConfig, versions: dict[str, str], gpu: str) -> str:
    """The compile store's key of ``engine`` with these package ``versions`` (vllm, torch) on ``gpu``."""
    return _digest({
        "vllm": versions.get("vllm"), "torch": versions.get("torch"), "gpu": gpu,
        "model_config": _model_config_sha(engine.model), "dtype": engine.dtype,
        "max_model_len": engine.max_model_len, "kv_cache_dtype": engine.kv_cache_dtype,
        "batch_invariant": engine.batch_invariant,
        "engine_args": {k: v for k, v in engine.engine_args.items() if k not in NOT_COMPILE_ARGS},
    })


def jit_key(versions: dict[str, str], gpu: str) -> str:
    """The JIT folder's key: vLLM's and torch's versions (vLLM pins its FlashInfer and Triton; FlashInfer also keeps
    a folder per its own version and GPU architecture inside) and ``gpu``."""
    return _digest({"vllm": versions.get("vllm"), "torch": versions.get("torch"), "gpu": gpu, "jit": 1})


def engine_key(engine: EngineConfig, extra: dict | None = None) -> str:
    """The whole engine configuration's hash (``extra``: what the stage adds to the engine arguments): two starts
    of one key should come up with one KV capacity."""
    return _digest({**engine.model_dump(), "extra": extra or {}})


@dataclass(frozen=True)
class CompileSlot:
    """One start's place in the compile store: its key, its folder and whether that was warm before the start."""

    key: str
    folder: Path
    state: str  # "cold" | "warm"
    jit: Path | None = None  # the build's shared JIT folder


def _copy_modelinfos(source: Path, target: Path) -> None:
    """Copy each of ``source``'s modelinfo files that ``target`` lacks (plain files of at most MAX_MODELINFO_BYTES,
    at most MAX_MODELINFOS of them), each written whole to a fresh temporary file and renamed into place beside a
    concurrent copier. Links are neither read nor written through. A copy that fails is a warning: the facts only
    save vLLM a subprocess, so a start never fails for them."""
    try:
        if not source.is_dir() or source.is_symlink() or target.is_symlink():
            return
        target.mkdir(parents=True, exist_ok=True)
        for f in islice(source.iterdir(), MAX_MODELINFOS):
            to = target / f.name
            if (f.suffix != ".json" or f.is_symlink() or not f.is_file() or to.exists() or to.is_symlink()
                    or f.stat().st_size > MAX_MODELINFO_BYTES):
                continue
            data = safeio.read_bytes(f, "state")
            if len(data) > MAX_MODELINFO_BYTES:
                continue
            atomic.write(to, data)
    except (OSError, SuiteError) as e:
        log.warning("vLLM's model-class facts not shared (%s -> %s): %s", source, target, e)


def use(engine: EngineConfig, versions: dict[str, str], env=None) -> CompileSlot | None:
    """Point ``env`` (default: this process's environment, which the engine and a server it spawns read) at the key's
    folder under ``$SUITE_STORE/compile-cache``; None (nothing changed) when the stage was given no store."""
    env = os.environ if env is None else env
    store = env.get(STORE_ENV)
    if not store:
        return None
    gpu = gpu_name()
    key = compile_key(engine, versions, gpu)
    folder = Path(store) / COMPILE_DIR / key
    jit = Path(store) / COMPILE_DIR / f"{JIT_PREFIX}{jit_key(versions, gpu)}"
    state = "warm" if (folder / COMPLETE).is_file() else "cold"
    for base, variables in ((folder, CACHE_VARS), (jit, JIT_VARS)):
        for var, sub in variables.items():
            (base / sub).mkdir(parents=True, exist_ok=True)
            env[var] = str(base / sub)
    _copy_modelinfos(jit / MODELINFO, folder / CACHE_VARS["VLLM_CACHE_ROOT"] / MODELINFO)
    return CompileSlot(key, folder, state, jit)


def mark_complete(slot: CompileSlot | None) -> None:
    """Record that an engine of the slot's configuration came up: the next start of it is warm; the model-class
    facts its vLLM wrote are shared with the build's other configurations."""
    if slot is not None:
        (slot.folder / COMPLETE).write_text(json.dumps({"key": slot.key}))
        if slot.jit is not None:
            _copy_modelinfos(slot.folder / CACHE_VARS["VLLM_CACHE_ROOT"] / MODELINFO, slot.jit / MODELINFO)


def store_bytes(store: Path) -> int:
    """The compile store's size on disk (every file under ``<store>/compile-cache``)."""
    root = Path(store) / COMPILE_DIR
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
