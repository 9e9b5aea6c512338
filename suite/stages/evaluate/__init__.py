"""The evaluate stage: lm-eval on vLLM's engine (serve environment), its tasks, and the sandbox for model-written code."""
