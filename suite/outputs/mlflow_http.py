"""Reaching an MLflow tracking server over HTTP: every call bounded, whether it answers, and whether a failure was
the server refusing this user (401/403), read from what MLflow and requests carry, never from the text."""

from __future__ import annotations

# per request: 10 s timeout, 2 retries with 1 s backoff: a dead server fails a call in < 30 s (MLflow's
# defaults, 120 s and 7 retries with backoff 2, made `suite sync` hang for 8 minutes)
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
               "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


def bound_http_calls() -> None:
    import os

    for k, v in HTTP_LIMITS.items():
        os.environ.setdefault(k, v)


def unreachable(uri: str, timeout_s: float = 5.0) -> str | None:
    """Why an HTTP tracking server cannot be used now (None: it answers, or the store is local)."""
    if not uri.startswith(("http://", "https://")):
        return None
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s):
            return None
    except urllib.error.HTTPError as e:  # it answered (an auth-protected /health still means "up")
        return None if e.code in (401, 403) else f"{uri}/health answered HTTP {e.code}"
    except (urllib.error.URLError, OSError) as e:
        return f"tracking server {uri} unreachable: {getattr(e, 'reason', e)}"


REFUSAL_CODES = {"UNAUTHENTICATED": 401, "CUSTOMER_UNAUTHORIZED": 401, "PERMISSION_DENIED": 403}


def refusal_status(error: BaseException) -> int | None:
    """401 or 403 when a tracking call failed because the server refused this user, else None. Read from what
    MLflow and requests carry, along the exception's chain: an ``MlflowException``'s ``error_code`` (the REST
    client's, for a JSON or plain-text answer) or an HTTP response's status code (``requests.HTTPError``, raised
    by the HTTP artifact repository's uploads). Never from the text: a URI's port (":40355") holds "403", and a
    dead server on that port was once reported as a refusal."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        status = REFUSAL_CODES.get(getattr(error, "error_code", None) or "")
        if status is None:
            code = getattr(getattr(error, "response", None), "status_code", None)
            status = code if code in (401, 403) else None
        if status is not None:
            return status
        error = error.__cause__ or error.__context__
    return None
