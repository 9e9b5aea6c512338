"""The kvcheck stage: FP8 KV-cache scales checked on held-out text before a variant is evaluated."""
