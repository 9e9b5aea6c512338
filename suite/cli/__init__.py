"""The `suite` command line. Thin: parse, load and validate the recipe, call the runner or a stage.

Each command is one module of suite.cli.commands (its arguments and its run), listed once in
suite.cli.commands.COMMANDS; the exit codes are described in suite.runtime.errors.
"""

from __future__ import annotations

import argparse
import errno
import io
import sys

from suite.version import __version__
from suite.records.registry import RegistryError
from suite.runtime.errors import EXIT_BAD_INPUT, Problem, SuiteError, exit_codes_text
from suite.cli.commands import command_modules

DESCRIPTION = f"""\
FP8 accuracy-vs-throughput evaluation for LLMs served by vLLM.

One recipe (YAML) names a model, its BF16 baseline and FP8 variants. `suite run` builds each FP8
checkpoint with llmcompressor, scores every variant with lm-eval's vLLM backend, serves each one
with `vllm serve` and loads it with `vllm bench serve`, logs everything to MLflow (one parent run,
one nested run per variant) and writes summary.json and frontier.png in the run folder.
`suite gate` then passes or fails the release on the recipe's accuracy-drop and throughput gates.

{exit_codes_text()}
"""


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions as argparse does; keeps the examples epilog's lines as written."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _epilog(examples) -> str | None:
    return "examples:\n" + "".join(f"  {line}\n" for line in examples) if examples else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="suite", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"suite {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in command_modules():
        kw = {"description": cmd.DESCRIPTION} if cmd.DESCRIPTION is not None else {}
        sp = sub.add_parser(cmd.NAME, help=cmd.HELP, epilog=_epilog(getattr(cmd, "EXAMPLES", ())),
                            formatter_class=_HelpFormatter, **kw)
        cmd.add_arguments(sp)
        sp.set_defaults(func=cmd.run)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)  # a plug-in command whose entry point does not load: RegistryError
        return args.func(args)
    except (SuiteError, RegistryError) as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        if e.errno not in ENVIRONMENT_ERRNOS:
            raise
        print(f"error: {environment_problem(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT


# A disk that is full or read-only, or a folder the user may not write or read, is the environment's fault, not a
# failed gate: one line naming the path and exit 2 (a traceback's exit 1 reads as "gate failed" to a CI job).
ENVIRONMENT_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "free space on that disk, or give --out / output_dir on another one",
    errno.EDQUOT: "free space within your quota, or write the run folder elsewhere",
    errno.EROFS: "that file system is read-only: give a folder on a writable one",
    errno.EACCES: "check the path's permissions, or give a folder you may write",
    errno.EPERM: "check the path's permissions, or give a folder you may write",
}


def _open_file_of(e: BaseException) -> str | None:
    """The name of the file open where ``e`` was raised: a write on a full disk fails in ``write``, whose error names
    no file, so the innermost frame holding an open file object (pathlib's ``write_text``, a ``with`` block's file)
    names it."""
    frames, tb = [], e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if isinstance(value, io.IOBase) and isinstance(getattr(value, "name", None), str):
                return value.name
    return None


def environment_problem(e: OSError) -> Problem:
    """One line for an OSError the environment caused: the path, what the system said, and the fix."""
    path = e.filename if e.filename is not None else _open_file_of(e) or "(a file being written or read)"
    more = f" -> {e.filename2}" if e.filename2 is not None else ""
    return Problem(f"{path}{more}", "", e.strerror or str(e), ENVIRONMENT_ERRNOS[e.errno])
