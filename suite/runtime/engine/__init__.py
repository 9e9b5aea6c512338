"""vLLM engine helpers: engine-argument flags, batch limits, GPU shares, the engine-start log, the vllm CLI."""
