"""The records: every typed config and result that crosses a process boundary (pydantic only; the ground floor: imports nothing of `suite` above it)."""
