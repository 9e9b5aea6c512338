"""suite: FP8 accuracy-vs-throughput evaluation for LLMs served by vLLM.

Importing the package is cheap on purpose: engines (vLLM, lm-eval, llmcompressor, MLflow) are
imported only inside the stage that needs them, in its own process. The Python API (``suite.api``):
``suite.run(recipe, **overrides)``, ``suite.load_run(run_dir)``, ``suite.Run``; loaded on first use.
"""

from suite.version import __version__  # noqa: F401
__all__ = ["Run", "load_run", "run"]


def __getattr__(name: str):
    if name in __all__:
        from suite import api  # lazy (PEP 562): `import suite` stays cheap; the API loads the orchestrator

        return getattr(api, name)
    raise AttributeError(f"module 'suite' has no attribute {name!r}")
