"""Patterns that name credentials: environment variables a recipe may not set, credentials inside URIs (found, and
redacted for display), wherever a URI comes from: a recipe, the environment, a command line."""

from __future__ import annotations

import math
import re
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

# runtime.env names that hold credentials: they come from the environment, never from a recipe (a recipe
# is copied into the run folder, logged to MLflow and printed by `suite plan`)
SECRET_ENV = re.compile(r"(_PASSWORD|_PASSWD|_PASS|_SECRET|_TOKEN|_API_KEY|_ACCESS_KEY|_PRIVATE_KEY|_CREDENTIALS)$"
                        r"|^HF_TOKEN$", re.IGNORECASE)
URL_PASSWORD = re.compile(r"://[^/@\s:]*:[^/@\s]+@")  # scheme://user:password@host


_SECRET_KEY = re.compile(r"(token|password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|signature|sig|auth"
                         r"|credential|session|private[_-]?key)", re.IGNORECASE)
# token shapes: known prefixes (GitHub, Hugging Face, OpenAI, Slack, GitLab, AWS, Google, npm, PyPI), JWTs
_TOKEN_PREFIX = re.compile(r"(?<![A-Za-z0-9])(ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|hf_|sk-|sk_|xox[abprse]-|glpat-"
                           r"|AKIA|ASIA|ya29\.|AIza|npm_|pypi-)[A-Za-z0-9_\-]{8,}")
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*")


def looks_like_token(value: str) -> bool:
    """A known token prefix, a JWT, or a long random-looking string: 20+ characters of a base64/hex alphabet
    with digits and letters of both cases (or 32+ hex digits) and high entropy."""
    if _TOKEN_PREFIX.search(value) or _JWT.search(value):
        return True
    v = value.strip()
    if len(v) < 20 or not re.fullmatch(r"[A-Za-z0-9+/=_\-.~]+", v) or not re.search(r"\d", v):
        return False
    hexy = len(v) >= 32 and re.fullmatch(r"[0-9a-fA-F]+", v) is not None
    if not hexy and not (re.search(r"[a-z]", v) and re.search(r"[A-Z]", v)):
        return False
    counts = [v.count(c) for c in set(v)]
    entropy = -sum(n / len(v) * math.log2(n / len(v)) for n in counts)
    return entropy >= (3.0 if hexy else 3.5)


def _pairs(text: str) -> list[tuple[str, str]]:
    out = []
    for part in re.split(r"[&;]", text):
        k, _, v = part.partition("=")
        out.append((unquote_plus(k), unquote_plus(v)))
    return out


def _uri_credential_once(uri: str) -> str | None:
    try:
        parts = urlsplit(uri)
        password, user = parts.password, parts.username
    except ValueError:
        return "a URI that does not parse"
    if password is not None:
        return "a password"
    if user and ((parts.scheme.lower() in ("http", "https") and len(user) >= 20) or looks_like_token(unquote(user))):
        return "a token as the user name"
    for where, text in (("the query string", parts.query), ("the fragment", parts.fragment)):
        if any(_SECRET_KEY.search(k) or looks_like_token(v) or looks_like_token(k) for k, v in _pairs(text)):
            return f"a credential in {where}"
    for seg in parts.path.split("/"):
        _, _, params = seg.partition(";")
        if params and any(_SECRET_KEY.search(k) or looks_like_token(v) for k, v in _pairs(params)):
            return "a credential in a path parameter"
        if _TOKEN_PREFIX.search(unquote(seg)) or _JWT.search(unquote(seg)):
            return "a token in the path"
    return None


def uri_credential(uri: str) -> str | None:
    """What credential a URI carries (a password or a token in its user part, a secret key or a token-shaped
    value in its query, fragment or path parameters, a known token in its path), also once percent-decoded;
    or None. Nothing of the credential is returned."""
    if not isinstance(uri, str) or "://" not in unquote(unquote(uri)):
        return None
    seen = set()
    while uri not in seen and len(seen) < 4:
        seen.add(uri)
        if "://" in uri and (what := _uri_credential_once(uri)) is not None:
            return what
        uri = unquote(uri)
    return None


def redact_uri(uri: str) -> str:
    """``uri`` as it may be shown when it holds a credential: its scheme, host and port, the rest left out."""
    fixed = uri if "://" in uri else uri.replace(":/", "://", 1)
    try:
        parts = urlsplit(fixed)
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "<a URI, not shown: it holds a credential>"
    return f"{parts.scheme}://{host}/<not shown: it holds a credential>"


# a token of a known shape standing alone in a message (a hub id's query, a path): its prefix, 16+ characters with a
# digit among them (so that a folder like hf_cache_dir is not taken for one), or an AWS key id, or a JWT
_TOKEN_IN_TEXT = re.compile(r"(?<![A-Za-z0-9])((ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|hf_|sk-|xox[abprse]-|glpat-|npm_"
                            r"|pypi-)(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_\-]{4,}\."
                            r"[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*)")
# a URI inside a message (a path may have folded its '//' into '/': /tmp/https:/user:pw@host/m)
_URI_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/[^\s'\"<>()\[\]{},]*")


def redact(text: str) -> str:
    """``text`` with every URI in it that holds a credential (a user part, a secret in its query, fragment or path,
    also percent-encoded) cut down to its scheme, host and port, and every token of a known shape left out: what an
    error line or a printed target may show."""
    def one(m: re.Match) -> str:
        u = m.group(0).rstrip(":;.")  # the punctuation after a URI in a sentence
        whole = u if "://" in u else u.replace(":/", "://", 1)
        return (redact_uri(u) if "@" in u or uri_credential(whole) else u) + m.group(0)[len(u):]
    text = _URI_IN_TEXT.sub(one, text) if ":/" in text else text
    return _TOKEN_IN_TEXT.sub("<token not shown>", text)
