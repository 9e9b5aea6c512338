"""Recipe guards against hostile or impossible values: environment names, engine ranges, caps, URIs, paths.

What a recipe may not do (issue 40): set the environment that loads code into every stage process, ask vLLM
for values outside the ranges it defines, name layers or modules the model does not have, write run folders
into the system or the checkout, or carry credentials in a URI. The schema calls the checks that need no
file (``env_problem``, ``ignore_pattern_problem``; a URI's credentials: ``suite.runtime.secrets``); ``model_problems`` and
``output_dir_refusal`` read the local model's config.json and safetensors headers (never the weights) and the
file system, and run in ``check_references`` before any model loads.
"""

from __future__ import annotations

import difflib
import re
import struct
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from suite.runtime import safeio
from suite.runtime.errors import Problem
from suite.runtime.secrets import uri_credential

# counts a recipe may ask for: far above any study measured, low enough that a typo (1e9) is not a week of work
MAX_REPETITIONS = 100
MAX_NUM_PROMPTS = 1_000_000
MAX_CALIBRATION_SAMPLES = 100_000
MAX_NAME_LEN = 64  # variant and recipe names: path components, MLflow run names and tags

_SHELL = "export it in the shell that runs `suite` (stage processes inherit that environment)"
# (prefix or exact name, what it controls, where to set it instead); matched case-insensitively
_REFUSED_ENV: list[tuple[str, bool, str, str]] = [
    ("LD_", True, "controls the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH load code into every stage process)",
     _SHELL),
    ("PYTHON", True, "controls the stage interpreters (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONINSPECT run or "
     "replace code in every stage process; the suite sets PYTHONPATH itself)",
     "point SUITE_SERVE_PYTHON / SUITE_QUANTIZE_PYTHON at another interpreter, or " + _SHELL),
    ("PATH", False, "decides which programs the stages start", _SHELL),
    ("BASH_ENV", False, "runs a script in every bash the stages start", _SHELL),
    ("ENV", False, "runs a script in every sh the stages start", _SHELL),
    ("GCONV_PATH", False, "makes glibc load code from a folder", _SHELL),
    ("VLLM_PLUGINS", False, "loads vLLM plugins (code) into every engine",
     "install the plugin in the serve environment and " + _SHELL),
    ("SUITE_ALLOW_CODE_EXECUTION", False, "is the suite's own switch (a recipe's copy was silently ignored)",
     "set eval.allow_code_execution: true"),
    ("SUITE_CODE_SANDBOX", False, "is the suite's own switch (a recipe's copy was silently ignored)",
     "set eval.code_sandbox"),
    ("SUITE_", True, "configures the suite itself (interpreters, lock, cache, sandbox): a recipe may not change it",
     _SHELL),
    ("MLFLOW_", True, "configures MLflow, which only the parent process talks to",
     "use the recipe's tracking section (tracking.uri, tracking.experiment); credentials: " + _SHELL),
]


# runtime.env is an allow list (issue 40): the names below, and vLLM's own switches (VLLM_*) but those that take a
# path or load code. Anything else (a loader, a proxy, a CA bundle, a hub endpoint, a plugin or cache folder) could
# load code into every stage process or send the Hugging Face token the stages keep somewhere else.
ALLOWED_ENV = frozenset({
    "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_PROGRESS_BARS", "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
    "CUBLAS_WORKSPACE_CONFIG", "PYTORCH_CUDA_ALLOC_CONF", "NCCL_DEBUG", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE",
})
# VLLM_* names that take a path or a folder, or load code, models or adapters from elsewhere (vllm/envs.py)
_VLLM_PATHLIKE = re.compile(r"(_PATH|_DIR|_ROOT|_FILE|_FOLDER|_SO)(_|$)|_CONFIG")
_VLLM_REFUSED = {
    "VLLM_USE_MODELSCOPE": "loads the model from ModelScope instead of the hub or folder the recipe names",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "lets vLLM's processes unpickle messages (pickle runs code)",
    "VLLM_ASSETS_CACHE": "is a folder vLLM reads assets from",
    "VLLM_MEDIA_CACHE": "is a folder vLLM reads cached media from",
    "VLLM_FORCE_AOT_LOAD": "loads compiled code from the compile cache without checking it",
    "VLLM_LORA_RESOLVER_HF_REPO_LIST": "loads LoRA adapters from hub repositories into the engine",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets the server load LoRA adapters while it runs",
    "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "copies more of the environment into Ray workers",
    "VLLM_TEST_FORCE_LOAD_FORMAT": "changes how the weights load (a test switch)",
}


def env_name_allowed(name: str) -> str | None:
    """None when a recipe may set ``name`` in runtime.env (the allow list, or a VLLM_* switch that takes no path
    and loads no code); else what the name does that a recipe may not."""
    if name in ALLOWED_ENV:
        return None
    if name.startswith("VLLM_"):
        if name in _VLLM_REFUSED:
            return _VLLM_REFUSED[name]
        if _VLLM_PATHLIKE.search(name):
            return "takes a path or a configuration file, from which vLLM reads or loads code"
        return None
    return ("is not on the list a recipe may set (vLLM's VLLM_* switches, the Hugging Face offline switches, "
            "thread counts, CUDA device selection, PYTORCH_CUDA_ALLOC_CONF, NCCL_DEBUG): other names can load "
            "code into stage processes or send the Hugging Face token elsewhere")


def env_problem(name: str, value: object) -> tuple[str, str] | None:
    """(what, fix) when a runtime.env entry sets a name that controls loaders, interpreters or the suite, a
    value with a NUL byte or a line break (the value is never repeated: it may be a secret), or a name outside
    the allow list."""
    upper = name.upper()
    for key, prefix, what, fix in _REFUSED_ENV:
        if upper.startswith(key) if prefix else upper == key:
            return f"{name} {what}", fix
    if isinstance(value, str) and "\0" in value:
        return f"{name}: the value holds a NUL byte (no process can be given it)", "remove the NUL byte"
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        return f"{name}: the value holds a line break", "give a one-line value"
    if (why := env_name_allowed(name)) is not None:
        return f"{name} {why}", ("remove it; if you know what it does, export it in the shell that runs `suite` "
                                 "(stage processes inherit that environment)")
    if isinstance(value, str) and (what := uri_credential(value)):
        return f"{name}: the value is a URI that holds {what}", ("remove the credential and export it in the "
                                                                 "shell that runs `suite`")
    return None


SHORTHAND = re.compile(r"^(first|last):\s*(\d+)$")  # = suite.stages.quantize.stage.SHORTHAND


def ignore_pattern_problem(entry: str) -> str | None:
    """Why a quantization.ignore entry is malformed (an 're:' pattern that does not compile), or None."""
    if entry.startswith("re:"):
        try:
            re.compile(entry[3:])
        except re.error as e:
            return f"{entry!r} is not a valid regular expression: {e}"
    return None


def model_config(model_dir: Path) -> dict | None:
    """config.json of a local model (its text_config for a multimodal one), or None."""
    try:
        cfg = safeio.read_json(model_dir / "config.json", "model_config")
    except (OSError, ValueError):
        return None
    return cfg.get("text_config", cfg) if isinstance(cfg, dict) else None


def max_model_len_limit(cfg: dict) -> int | None:
    """The longest max_model_len vLLM derives from a config: max_position_embeddings, times the RoPE scaling
    factor for the scalings that stretch it (vLLM's _get_and_verify_max_len)."""
    n = cfg.get("max_position_embeddings")
    if not isinstance(n, int) or n < 1:
        return None
    rope = cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
    factor = rope.get("factor") if isinstance(rope, dict) else None
    if kind not in (None, "default", "su", "longrope", "llama3", "mrope") and isinstance(factor, (int, float)):
        n = int(n * factor)
    return n


_HEADER_CAP = 100 << 20  # a safetensors header larger than this is not read


def module_names(model_dir: Path) -> list[str] | None:
    """The module names of a local model, from its safetensors index or file headers (no tensor is read): each
    weight's owner and every folder above it, and lm_head (tied to the embeddings, it has no weight of its own).
    None when the folder has no safetensors."""
    weights: list[str] = []
    index = model_dir / "model.safetensors.index.json"
    try:
        if index.is_file():
            weights = list(safeio.read_json(index, "model_config").get("weight_map", {}))
        else:
            for f in sorted(model_dir.glob("*.safetensors")):
                with safeio.open_bytes(f, "weights") as fh:
                    (size,) = struct.unpack("<Q", fh.read(8))
                    if size > _HEADER_CAP:
                        return None
                    weights += [k for k in safeio.loads_json(fh.read(size), f, "weights_header") if k != "__metadata__"]
    except (OSError, ValueError, struct.error):
        return None
    if not weights:
        return None
    names = {"lm_head"}
    for w in weights:
        parts = w.split(".")[:-1]
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(names)


def _is_class_name(entry: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Za-z0-9_]*", entry))  # LlamaDecoderLayer, Linear: not in the weights' names


def unmatched_ignore(entry: str, names: list[str]) -> list[str] | None:
    """None when ``entry`` matches a module the way the quantize stage matches (a name, a name's last part, an
    're:' pattern, or a class name, which is not checked here); else the closest module names."""
    if entry.startswith("re:"):
        rx = re.compile(entry[3:])
        if any(rx.match(n) for n in names):
            return None
        target = entry[3:]
    elif _is_class_name(entry) or any(n == entry or n.endswith("." + entry) for n in names):
        return None
    else:
        target = entry
    leaves = sorted({n.rsplit(".", 1)[-1] for n in names})
    near = difflib.get_close_matches(target, leaves + names, n=3, cutoff=0.5)
    return near or names[:3]


def _sections(r):
    return [("baseline", r.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(r.variants)]


def _ignore_problems(f: str, r, n_layers: int | None, names: list[str] | None) -> list[Problem]:
    out = []
    for where, v in _sections(r):
        q = v.quantization
        for j, entry in enumerate(q.ignore if q is not None else []):
            fld = f"{where}.quantization.ignore[{j}]"
            m = SHORTHAND.match(entry.strip())
            if m and n_layers is not None and not 1 <= int(m.group(2)) <= n_layers:
                out.append(Problem(f, fld, f"{entry!r}: the model has {n_layers} decoder layers (num_hidden_layers "
                                   "in config.json)", f"give a count from 1 to {n_layers}"))
            elif not m and names is not None and (near := unmatched_ignore(entry, names)) is not None:
                out.append(Problem(f, fld, f"{entry!r} matches no module of the model (a typo would quantize a "
                                   f"module meant to stay in BF16); closest: {', '.join(near)}",
                                   "use a module name, its last part (q_proj), an 're:' pattern or a class name"))
    return out


def model_problems(loaded) -> list[Problem]:
    """Checks against a local model's config.json and safetensors headers, before any model loads:
    max_model_len within what vLLM derives, 'first:'/'last:' counts and kv_cache_dtype_skip_layers within
    num_hidden_layers, and every quantization.ignore entry matching a module."""
    r, f = loaded.recipe, str(loaded.path)
    if not loaded.model_is_local():
        return []
    model_dir = loaded.resolve(r.model.id)
    cfg = model_config(model_dir)
    if cfg is None:
        return []
    out = []
    limit = max_model_len_limit(cfg)
    long_ok = r.runtime.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    if limit is not None and r.model.max_model_len > limit and not long_ok:
        out.append(Problem(f, "model.max_model_len", f"{r.model.max_model_len} is above the model's "
                           f"{limit} positions (max_position_embeddings in config.json): vLLM refuses it",
                           f"give at most {limit}"))
    n = cfg.get("num_hidden_layers") if isinstance(cfg.get("num_hidden_layers"), int) else None
    for where, v in _sections(r):
        skip = v.engine_args.get("kv_cache_dtype_skip_layers")
        if n is not None and isinstance(skip, list):
            bad = [i for i in skip if not (isinstance(i, int) or str(i).isdigit()) or not 0 <= int(i) < n]
            if bad:
                out.append(Problem(f, f"{where}.engine_args.kv_cache_dtype_skip_layers", f"layer(s) {bad} out of "
                                   f"range: the model has {n} decoder layers", f"give indices from 0 to {n - 1}"))
    names = module_names(model_dir) if r.model.weights == "pretrained" else None
    return out + _ignore_problems(f, r, n, names)


# vLLM's own ranges (EngineArgs / CacheConfig / ParallelConfig): (low, low inclusive, high) for numbers
ENGINE_RANGES = {
    "gpu_memory_utilization": (0.0, False, 1.0),
    "tensor_parallel_size": (1, True, None), "pipeline_parallel_size": (1, True, None),
    "data_parallel_size": (1, True, None), "max_model_len": (1, True, None), "max_num_seqs": (1, True, None),
    "max_num_batched_tokens": (1, True, None),
}


def engine_range_problems(loaded) -> list[Problem]:
    """Engine arguments outside the range vLLM defines for them (a number of the wrong type is left to the
    type check against EngineArgs)."""
    r, f = loaded.recipe, str(loaded.path)
    out = []
    for where, v in _sections(r) + [("eval", r.eval)]:
        for key, (low, inclusive, high) in ENGINE_RANGES.items():
            val = v.engine_args.get(key)
            if isinstance(val, bool) or not isinstance(val, (int, float)):
                continue
            if (val < low or (val == low and not inclusive)) or (high is not None and val > high) or val != val:
                span = f"({low}, {high}]" if high is not None else f">= {low}"
                out.append(Problem(f, f"{where}.engine_args.{key}", f"{val} is outside vLLM's range {span}",
                                   f"give a value in {span}"))
    return out


# folders no run folder may go in (and the subtrees below them): the system's, not a user's. /var/tmp is allowed.
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
               "/sys", "/usr", "/var")


def output_dir_refusal(out: Path, repo_root: Path) -> str | None:
    """Why run folders may not go under ``out`` (resolved): '/', a system folder, or the suite's checkout
    (its root or any folder inside it: run folders, checkpoints and caches would mix with the code, and a
    checkpoint could land inside the suite's own package), else None. The checkout's top-level ``runs/``
    stays allowed: git ignores it, and the repository's recipes (the README's demo included) default to it
    through ``output_dir: ../runs``."""
    out = Path(out).resolve()
    if out == Path("/"):
        return "is the root folder"
    root = repo_root.resolve()
    if out == root:
        return "is the project's root folder (run folders, checkpoints and caches would mix with the code)"
    runs = (root / "runs").resolve()
    if root in out.parents and not (out == runs or runs in out.parents):
        return (f"is inside the project's checkout ({root}; run folders, checkpoints and caches would mix with "
                "the code): only its runs/ folder, which git ignores, may hold run folders")
    return system_folder(out)


def system_folder(path: Path) -> str | None:
    """Why nothing of the suite's may go at ``path`` (resolved): '/', or in a system folder (SYSTEM_DIRS, but
    /var/tmp), else None."""
    path = Path(path).resolve()
    if path == Path("/"):
        return "is the root folder"
    for d in SYSTEM_DIRS:
        if (path == Path(d) or Path(d) in path.parents) and not (path == Path("/var/tmp")
                                                                  or Path("/var/tmp") in path.parents):
            return f"is a system folder ({d})"
    return None


# tracking URIs that name a service, not a path, though they have no "scheme://" (MLflow's own names)
_NAMED_SERVICES = ("databricks", "databricks-uc", "uc")


def local_store_paths(uri: str) -> list[Path] | None:
    """The file or folder a local MLflow store URI writes, as MLflow reads it: a SQLite database (``sqlite:///rel``,
    ``sqlite:////abs``, a dialect+driver such as ``sqlite+pysqlite:``), a file store (``file:///abs``, a bare path);
    both the path as written and percent-decoded, since MLflow and SQLAlchemy decode it. ``[]``: SQLite in memory;
    None: a server or a database elsewhere (nothing written on this machine)."""
    uri = uri.strip()
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme.startswith("sqlite"):
        raw = uri.split("://", 1)[1] if "://" in uri else ""
        raw = raw.split("?", 1)[0]
        raw = raw[1:] if raw.startswith("/") else raw  # sqlite:///x.db is x.db, sqlite:////x.db is /x.db
        return [] if raw in ("", ":memory:") else [Path(p) for p in dict.fromkeys((raw, unquote(raw)))]
    if scheme == "file":
        return [Path(p) for p in dict.fromkeys((parts.path, url2pathname(parts.path)))]
    if scheme == "" and uri not in _NAMED_SERVICES:
        return [Path(p) for p in dict.fromkeys((uri, url2pathname(uri)))]
    return None


def tracking_uri_refusal(uri: str, repo_root: Path) -> str | None:
    """Why MLflow may not keep its store where ``uri`` says (a local store held to ``output_dir_refusal``'s rules:
    not '/', a system folder or the suite's checkout outside its runs/; a relative path is where MLflow would put it,
    under the current folder), else None. A server's URI is not a place on this machine: None."""
    for path in local_store_paths(uri) or []:
        try:
            if (why := output_dir_refusal(path, repo_root)) is not None:
                return f"{path.resolve()}: it {why}"
        except (OSError, RuntimeError) as e:  # a link loop on the way
            return f"{path} cannot be resolved ({e})"
    return None
