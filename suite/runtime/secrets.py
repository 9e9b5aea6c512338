"""Patterns that name credentials: environment variables a recipe may not set, and passwords inside URLs."""

from __future__ import annotations

import re

# runtime.env names that hold credentials: they come from the environment, never from a recipe (a recipe
# is copied into the run folder, logged to MLflow and printed by `suite plan`)
SECRET_ENV = re.compile(r"(_PASSWORD|_PASSWD|_PASS|_SECRET|_TOKEN|_API_KEY|_ACCESS_KEY|_PRIVATE_KEY|_CREDENTIALS)$"
                        r"|^HF_TOKEN$", re.IGNORECASE)
URL_PASSWORD = re.compile(r"://[^/@\s:]*:[^/@\s]+@")  # scheme://user:password@host
