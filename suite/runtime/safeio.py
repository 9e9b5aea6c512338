"""The one safe reader: every file the suite reads goes through here, with a size and a nesting cap per kind of file.

A file is read only if it is a regular file: its ``os.stat`` is checked before it is opened (a FIFO, a device such
as ``/dev/zero``, a socket or a directory is never opened), it is opened ``O_NONBLOCK`` (a FIFO swapped in between
cannot block the open) and checked again on the open descriptor. A read of a regular file cannot block, so no read
needs a timeout. Where the caller names ``roots``, the file's real path (links followed) must lie under one of them.
Each kind of file has a size cap, enforced by a bounded read (never an unbounded ``.read()``), a per-line cap for
line files, the same cap on what a ``.gz`` holds once decompressed, and a nesting cap: JSON is scanned for its
bracket depth before it is parsed (``json`` recurses: 200,000 levels end in RecursionError), YAML's event stream is
walked before it is composed (PyYAML's composer recurses too), and what its aliases expand to is capped
(``suite.runtime.yaml_aliases``). A folder walk has a cap on entries and depth.

A refusal raises ``UnsafeRead``, a ``SuiteError`` (exit 2, one line naming the file). A missing file still raises
``FileNotFoundError`` and a decoding error still raises ``ValueError`` (json.JSONDecodeError, yaml.YAMLError), as the
plain readers do, so callers keep their own messages for those.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import stat
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Iterator, Sequence

import yaml

from suite.runtime.errors import Problem, SuiteError
from suite.runtime.yaml_aliases import alias_problem

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """What one kind of file may be: its size (decompressed, for a .gz), one line's size and its nesting depth."""

    what: str  # how a refusal names the kind
    max_bytes: int
    max_depth: int = 64
    max_line: int = 1 * MiB


# Each cap is far above what the suite writes or a real input holds, and far below what would exhaust memory.
KINDS: dict[str, Limits] = {
    "recipe": Limits("recipe", 1 * MiB),
    "policy": Limits("gate policy", 1 * MiB),
    "task": Limits("task YAML", 1 * MiB),
    "calibration": Limits("calibration set YAML", 1 * MiB),
    "model_config": Limits("model config", 16 * MiB),  # config.json, tokenizer_config.json, a weights index
    "template": Limits("chat template", 1 * MiB),
    "record": Limits("run record", 256 * MiB, max_depth=128),  # a stage's config or result, summary.json, plan.json
    "state": Limits("run state file", 16 * MiB),  # run.lock, progress, run options, a cached probe
    "manifest": Limits("manifest", 64 * MiB),
    "dataset": Limits("dataset file", 1 * GiB, max_line=16 * MiB),  # a workload, calibration or task data file
    "samples": Limits("samples file", 2 * GiB, max_line=64 * MiB),  # lm-eval's per-item samples JSONL
    "log": Limits("log", 1 * GiB, max_line=16 * MiB),  # a stage's or vLLM's log, parsed for what it says
    "weights": Limits("weights file", 4 << 40),  # hashed in chunks: only the regular-file check matters
    "weights_header": Limits("safetensors header", 100 * MiB),  # safetensors' own header limit
    "system": Limits("system file", 4 * MiB),  # /proc and /sys files the suite asks about the host
    "image": Limits("image", 64 * MiB),
    "run_file": Limits("run folder file", 2 * GiB),  # any file a signed manifest names
    "code": Limits("source file", 16 * MiB),
}

MAX_WALK_ENTRIES = 50_000  # files and folders a folder walk visits (a task folder holds hundreds)
MAX_WALK_DEPTH = 16  # folders below the one walked
# kernel and device file systems: refused by name, since how many entries they hold depends on the machine's state
# (a quiet host's /proc can stay under MAX_WALK_ENTRIES), and their files are no one's task YAMLs
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")


class UnsafeRead(SuiteError):
    """A file refused by the safe reader: not a regular file, outside its roots, too large or too deep (exit 2)."""

    def __init__(self, path, message: str, fix: str):
        super().__init__(Problem(str(path), "", message, fix))


def limits(kind: str) -> Limits:
    return KINDS[kind]


def _kind_name(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _check(path, st: os.stat_result, lim: Limits) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeRead(path, f"{_kind_name(st.st_mode)}, not a regular file (not read)",
                         f"give a regular file as the {lim.what}")
    if st.st_size > lim.max_bytes:
        raise _too_big(path, lim, st.st_size)


def _too_big(path, lim: Limits, size: int | None = None) -> UnsafeRead:
    got = f"{size:,} bytes: " if size is not None else ""
    return UnsafeRead(path, f"{got}larger than the {_human(lim.max_bytes)} a {lim.what} may hold (not read)",
                      f"give a smaller {lim.what}")


def _human(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def _within(path, roots: Sequence) -> None:
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return
    raise UnsafeRead(path, f"leads to {real}, outside {', '.join(str(r) for r in roots)} (not read)",
                     "keep the file (and what any link in its path points to) inside that folder")


def open_fd(path, kind: str, roots: Sequence | None = None) -> int:
    """A blocking, read-only descriptor of ``path``, only if it is a regular file within the kind's size cap (and,
    with ``roots``, lies under one of them once its links are followed)."""
    lim = KINDS[kind]
    if roots is not None:
        _within(path, roots)
    _check(path, os.stat(path), lim)  # FileNotFoundError / PermissionError as the plain readers raise them
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(path, os.fstat(fd), lim)  # it may have been swapped between the stat and the open
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def regular(path, kind: str, roots: Sequence | None = None) -> str:
    """``path`` as a string, once checked to be a regular file within the kind's cap: for a library that opens the
    file itself (safetensors' ``safe_open``). The check is not repeated on the library's own descriptor."""
    if roots is not None:
        _within(path, roots)
    _check(path, os.stat(path), KINDS[kind])
    return str(path)


def read_bytes(path, kind: str, roots: Sequence | None = None) -> bytes:
    """The file's bytes, read with a bound: a file that grew past the cap after it was checked is refused too."""
    lim = KINDS[kind]
    with open(open_fd(path, kind, roots), "rb", buffering=0, closefd=True) as fh:
        # in pieces the size the file says it has (a /proc file says 0): one read of the cap would allocate the cap
        want, chunks, total = max(os.fstat(fh.fileno()).st_size + 1, 64 * KiB), [], 0
        while chunk := fh.read(min(want, lim.max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > lim.max_bytes:
                raise _too_big(path, lim)
    return b"".join(chunks)


def read_text(path, kind: str, roots: Sequence | None = None, errors: str = "strict") -> str:
    """The file's UTF-8 text (``errors="replace"`` for logs); text that is not UTF-8 is refused."""
    data = read_bytes(path, kind, roots)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise UnsafeRead(path, f"not UTF-8 text (byte {e.start})", "save the file as UTF-8") from None


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_PARENS = bytes.maketrans(b"[]{}", b"()()")
_STEP = {ord("("): 1, ord(")"): -1}


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data


def _brackets(data: bytes | str, strings_out: bool = True) -> bytes:
    """The JSON's brackets alone, ``(`` for an opening one and ``)`` for a closing one; ``strings_out``: strings cut
    out first (a bracket in a string does not count; an unterminated string leaves its brackets in: no JSON)."""
    raw = _as_bytes(data)
    return (_JSON_STRING.sub(b"", raw) if strings_out else raw).translate(_PARENS, _NOT_BRACKETS)


def json_depth(data: bytes | str) -> int:
    """How deep the JSON's arrays and objects nest, without parsing it."""
    return max(accumulate(map(_STEP.__getitem__, _brackets(data))), default=0)


def _deeper_than(brackets: bytes, cap: int) -> bool:
    """Whether brackets nest deeper than ``cap``: each pass of ``replace`` removes the innermost pairs, so balanced
    brackets ``cap`` deep are gone after ``cap`` passes; what is left (deep, or unbalanced) is summed."""
    rest = brackets
    for _ in range(cap):
        if not rest:
            return False
        shorter = rest.replace(b"()", b"")
        if len(shorter) == len(rest):
            break
        rest = shorter
    return bool(rest) and max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > cap


def too_deep(data: bytes | str, cap: int) -> bool:
    """Whether the JSON nests deeper than ``cap``. The brackets are first counted as they stand (fast); only text
    that looks deep is scanned again with its strings cut out (slower), so that brackets in strings do not count.
    Closing brackets in strings can hide depth from the first count: ``loads_json`` refuses the RecursionError
    that json then raises, and pydantic's parser has a depth limit of its own."""
    return _deeper_than(_brackets(data, strings_out=False), cap) and _deeper_than(_brackets(data), cap)


def check_json_depth(data: bytes | str, path, kind: str, where: str = "") -> None:
    """Refuse JSON nested deeper than the kind's cap (counting the opening brackets first: most text has fewer
    than the cap in all, and needs no scan)."""
    lim, raw = KINDS[kind], _as_bytes(data)
    if raw.count(b"[") + raw.count(b"{") > lim.max_depth and too_deep(raw, lim.max_depth):
        raise UnsafeRead(path, f"{where + ': ' if where else ''}JSON nested more than {lim.max_depth} levels deep "
                         "(not parsed)", f"no {lim.what} nests that deep: give the file the suite or the tool wrote")


def loads_json(data: bytes | str, path, kind: str, where: str = "", **json_kw):
    """``json.loads`` of text read elsewhere (a line, a pipe's answer), after the kind's nesting check."""
    check_json_depth(data, path, kind, where)
    try:
        return json.loads(data, **json_kw)
    except RecursionError:
        raise UnsafeRead(path, f"{where + ': ' if where else ''}JSON nested too deep to parse (not parsed)",
                         f"no {KINDS[kind].what} nests that deep: give the file the suite or the tool wrote") from None


def read_json(path, kind: str, roots: Sequence | None = None, **json_kw):
    """The file's JSON: read with a bound, its nesting checked before it is parsed."""
    return loads_json(read_text(path, kind, roots), path, kind, **json_kw)


def yaml_depth_problem(text: str, path, kind: str, loader=yaml.SafeLoader) -> UnsafeRead | None:
    """The refusal for YAML nested deeper than the kind's cap, read from PyYAML's event stream (its parser is a
    loop, its composer recursive), or None."""
    depth, cap = 0, KINDS[kind].max_depth
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > cap:
                return UnsafeRead(path, f"line {event.start_mark.line + 1}: YAML nested more than {cap} levels deep "
                                  "(not loaded)", f"flatten it: no {KINDS[kind].what} nests that deep")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def loads_yaml(text: str, path, kind: str, loader=yaml.SafeLoader):
    """YAML text read elsewhere, loaded with ``loader`` (a SafeLoader or a subclass) after the nesting check and the
    check of what its aliases expand to (``suite.runtime.yaml_aliases``)."""
    if (refusal := yaml_depth_problem(text, path, kind, loader)) is not None:
        raise refusal
    if (aliases := alias_problem(text, loader)) is not None:
        raise UnsafeRead(path, f"line {aliases[0]}: {aliases[1]}", aliases[2])
    return yaml.load(text, Loader=loader)  # noqa: S506 (a SafeLoader or a subclass of it)


def read_yaml(path, kind: str, roots: Sequence | None = None, loader=yaml.SafeLoader):
    """The file's YAML: read with a bound, its nesting checked before it is composed."""
    return loads_yaml(read_text(path, kind, roots), path, kind, loader)


class _Capped(io.RawIOBase):
    """A raw stream that refuses to yield more than ``cap`` bytes (what a .gz holds counts, not what it weighs)."""

    def __init__(self, inner, closers: list, path, lim: Limits):
        self._inner, self._closers, self._path, self._lim, self.total = inner, closers, path, lim, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._inner.seekable()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._inner.seek(pos, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def readinto(self, b) -> int:
        n = self._inner.readinto(b)
        self.total += n or 0
        if self.total > self._lim.max_bytes:
            raise _too_big(self._path, self._lim)
        return n

    def close(self) -> None:
        if not self.closed:
            for c in self._closers:
                c.close()
        super().close()


def open_bytes(path, kind: str, roots: Sequence | None = None, gz: bool | None = None) -> io.BufferedReader:
    """A binary stream of the file (decompressed when ``gz``, by default when the name ends in .gz) that refuses
    to yield more than the kind's cap; use it as a context manager."""
    lim = KINDS[kind]
    raw = open(open_fd(path, kind, roots), "rb", closefd=True)
    if gz if gz is not None else str(path).endswith(".gz"):
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
        return io.BufferedReader(_Capped(inner, [inner, raw], path, lim))
    return io.BufferedReader(_Capped(raw, [raw], path, lim))


def open_text(path, kind: str, roots: Sequence | None = None, newline: str | None = None,
              errors: str = "strict") -> io.TextIOWrapper:
    """A UTF-8 text stream of the file (for csv and line readers), capped as ``open_bytes``."""
    return io.TextIOWrapper(open_bytes(path, kind, roots), encoding="utf-8", newline=newline, errors=errors)


def iter_lines(path, kind: str, roots: Sequence | None = None) -> Iterator[tuple[int, str]]:
    """(line number, line) for each non-blank line, each line within the kind's line cap."""
    cap = KINDS[kind].max_line
    try:
        with open_text(path, kind, roots) as fh:
            for n, line in enumerate(iter(lambda: fh.readline(cap + 1), ""), 1):
                if len(line) > cap and not line.endswith("\n"):
                    raise UnsafeRead(path, f"line {n}: longer than {_human(cap)} (not read)",
                                     f"one record per line, each at most {_human(cap)}")
                if line.strip():
                    yield n, line
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as e:
        raise UnsafeRead(path, f"cannot be read: {type(e).__name__}: {e}", "give UTF-8 text (optionally gzipped)") \
            from None


def iter_jsonl(path, kind: str, roots: Sequence | None = None) -> Iterator:
    """Each non-blank line's JSON, its nesting checked before it is parsed (json.JSONDecodeError as json raises it)."""
    for n, line in iter_lines(path, kind, roots):
        yield loads_json(line, path, kind, where=f"line {n}")


def sha256(path, kind: str, roots: Sequence | None = None) -> str:
    """The file's SHA-256, read in chunks (a regular file only, within the kind's cap)."""
    h = hashlib.sha256()
    with open_bytes(path, kind, roots, gz=False) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def walk_files(folder, pattern: str = "*", max_entries: int = MAX_WALK_ENTRIES,
               max_depth: int = MAX_WALK_DEPTH, follow_links: bool = False) -> list[Path]:
    """The files under ``folder`` whose name matches ``pattern``, sorted, from a walk that visits at most
    ``max_entries`` entries and ``max_depth`` folders down (a folder such as / or /proc is refused, not walked
    for ever). ``follow_links``: symlinked sub-folders are walked too, each real folder once (a link loop ends)."""
    top, out, seen, visited = Path(folder), [], set(), 0
    real_top = Path(os.path.realpath(top))
    if real_top == Path("/") or any(real_top == Path(r) or Path(r) in real_top.parents for r in SYSTEM_FOLDERS):
        raise UnsafeRead(folder, f"{real_top} is the root or a system folder (not walked)",
                         "give the folder that holds only your files (a task folder, not / or a system folder)")
    for root, dirs, files in os.walk(top, followlinks=follow_links):
        real = os.path.realpath(root)
        depth = len(Path(root).relative_to(top).parts)
        if real in seen or "__pycache__" in Path(root).parts:
            dirs[:] = []
            continue
        seen.add(real)
        visited += len(dirs) + len(files)
        if visited > max_entries or (dirs and depth >= max_depth):
            what = f"more than {max_entries:,} entries" if visited > max_entries else f"folders {max_depth} levels deep"
            raise UnsafeRead(folder, f"holds {what} (not walked further)",
                             "give the folder that holds only your files (a task folder, not / or a system folder)")
        dirs.sort()
        out += [Path(root) / f for f in files if fnmatch.fnmatch(f, pattern) and (Path(root) / f).is_file()]
    return sorted(out)
