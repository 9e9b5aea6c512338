"""suite: FP8 accuracy-vs-throughput evaluation for LLMs served by vLLM.

Importing the package is cheap on purpose: engines (vLLM, lm-eval, llmcompressor, MLflow) are
imported only inside the stage that needs them, in its own process.
"""

__version__ = "0.1.0"
