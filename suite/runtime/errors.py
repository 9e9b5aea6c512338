"""Errors a user can act on: each names the file, the field, what is wrong and the fix."""

from __future__ import annotations

from dataclasses import dataclass

from suite.runtime.secrets import redact

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
# `suite gate`: the data cannot decide (an interval straddles a threshold, an unstable throughput point, an
# engine-induced spread larger than the margin). Precedence when several apply: 2 > 1 > 3 > 0.
EXIT_INCONCLUSIVE = 3


@dataclass
class Problem:
    """One thing wrong with an input: where (file, field), what, and how to fix it."""

    file: str
    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        """The one line a user sees; a URI in it that holds a credential is cut to its scheme and host (a refused
        value is often repeated to say what is wrong with it)."""
        where = f"{self.file}: {self.field}: " if self.field else f"{self.file}: "
        return redact(where + self.message + (f" (fix: {self.fix})" if self.fix else ""))


class SuiteError(Exception):
    """Bad input or environment (exit code 2). Holds one or more problems."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = problems if isinstance(problems, list) else [problems]
        super().__init__("\n".join(str(p) for p in self.problems))


# What each exit code means, in one place: `suite --help` prints exit_codes_text(). A code defined above
# (e.g. EXIT_INCONCLUSIVE) is listed once its meaning is added here.
EXIT_MEANINGS: dict[str, str] = {
    "EXIT_OK": "ok",
    "EXIT_GATE_FAILED": "a gate failed",
    "EXIT_BAD_INPUT": "bad input or environment",
    "EXIT_INCONCLUSIVE": "a gate could not decide (inconclusive)",
}


def exit_codes_text() -> str:
    codes = globals()
    known = sorted((codes[name], meaning) for name, meaning in EXIT_MEANINGS.items() if name in codes)
    return "exit codes: " + ", ".join(f"{code} {meaning}" for code, meaning in known)
