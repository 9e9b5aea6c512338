"""The stages: each runs in a process of its own (``python -m suite.stages``); ``registry`` says what each one is."""
