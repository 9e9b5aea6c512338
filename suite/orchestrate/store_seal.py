"""The seal of a store entry (suite.orchestrate.store): with ``SUITE_MANIFEST_KEY`` set, each entry the store writes
carries ``seal.json``, an HMAC-SHA256 (keyed by that secret, as the run folder's manifest is:
suite.outputs.manifest) over the stage, the key and the sha256 of every file in the entry; an entry is reused only
when its seal verifies. A shared store (``SUITE_STORE``, ``store:``: a CI cache, a team folder) can be written by
others than the job that reads it, and a hit is filed into the run folder as that job's result and signed with it:
without the seal, an entry rewritten consistently (its samples, their sha256 in its result, its scores) would be
judged by ``suite gate --verify`` as genuine. An entry without a seal, or whose seal does not match (changed since it
was stored, or sealed with another key), is not reused: one line says so, the job runs again and its result replaces
the entry. Without the key nothing is sealed or checked: the store is then trusted like the output folder
(docs/07-reliability-and-threat-model.md).

The compile store (``<store>/compile-cache/<key>/``: vLLM's, Inductor's, Triton's and FlashInfer's caches, generated
code and kernels a later engine start loads) is sealed the same way, one seal per key folder over every file in it
(``__pycache__`` included: Python loads those), by the parent process: checked when a run begins (a folder whose seal
does not verify is deleted with one warning line, so its configuration starts cold) and written when the run's jobs
have ended. The stage processes that fill it never hold the key. Between the two the run holds
``<store>/compile-cache.lock`` (``CompileStore``): a second run on the same sealed store waits for it, since its
check would delete the first run's folders not sealed yet and the first run's seal would vouch for the second's
half-written ones.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import logging
import os
import shutil
import time
from itertools import islice
from pathlib import Path

from suite.outputs.manifest import KEY_ENV, sign
from suite.runtime import atomic, safeio
from suite.runtime.engine.compilecache import COMPILE_DIR, STORE_ENV
from suite.runtime.errors import Problem, SuiteError

SEAL = "seal.json"
FORMAT = "suite.store-seal/1"  # in the signed body: a seal is never a manifest, nor a manifest a seal
MAX_FILES = 10_000  # files an entry may hold (an evaluation's: its result, lm-eval's results, a samples file a task)
COMPILE_SEAL = ".suite-seal.json"  # in each compile key folder
LOCK_NAME = COMPILE_DIR + ".lock"  # beside the compile cache, whose own entries are folders only
LINK_OUT = "a link out of the folder"  # a compile folder's body when a link in it leads outside it
MAX_TREE_ENTRIES = 200_000  # files and folders one compile key folder may hold (a warm 8B start's: a few thousand)

log = logging.getLogger(__name__)


def _body(entry: Path, stage: str, key: str) -> dict:
    """What the seal signs: the stage, the key and each file of the entry but the seal (a folder in the entry, which
    the store never writes, is named so that it changes the seal)."""
    files = {}
    names = list(islice(Path(entry).iterdir(), MAX_FILES + 1))
    if len(names) > MAX_FILES:  # the store writes a result and its few files: this is no entry of its own
        return {"format": FORMAT, "stage": stage, "key": key, "files": f"more than {MAX_FILES} files"}
    for p in sorted(names):
        if p.name != SEAL:
            files[p.name] = safeio.sha256(p, "run_file") if p.is_file() and not p.is_symlink() else "not a file"
    return {"format": FORMAT, "stage": stage, "key": key, "files": files}


def _write_seal(path: Path, body: dict, secret: str) -> None:
    path.write_text(json.dumps({**body, "hmac": sign(body, secret)}, sort_keys=True) + "\n")


def _seal_problem(path: Path, body_of, secret: str, changed: str, unsealed: str) -> str | None:
    """Why the seal at ``path`` does not vouch for ``body_of()`` (what it should sign, computed only when there is a
    seal to check), or None when it does."""
    try:
        data = safeio.read_json(path, "manifest")
        body = body_of()
        if isinstance(body["files"], str):  # too many files, or a link out: a seal over that vouches for nothing
            return f"it cannot be vouched for ({body['files']})"
        if isinstance(data, dict) and isinstance(data.get("hmac"), str) and hmac.compare_digest(
                data["hmac"], sign(body, secret)):
            return None
        return f"its seal does not match: {changed}, or it was sealed with another key"
    except FileNotFoundError:
        return f"it carries no seal ({path.name}): {unsealed}"
    except (OSError, ValueError, RecursionError, SuiteError) as e:
        return f"its seal cannot be read ({e.problems[0].message if isinstance(e, SuiteError) else e})"


def seal(entry: Path, stage: str, key: str) -> None:
    """Write the entry's seal (the folder as it will be stored, before its rename), when the key is set."""
    secret = os.environ.get(KEY_ENV)
    if secret:
        _write_seal(Path(entry) / SEAL, _body(entry, stage, key), secret)


def refusal(entry: Path, stage: str, key: str) -> str | None:
    """Why the entry may not be reused (a line naming it, also logged), or None: its seal verifies, or no key is set."""
    secret = os.environ.get(KEY_ENV)
    if not secret:
        return None
    why = _seal_problem(Path(entry) / SEAL, lambda: _body(entry, stage, key), secret,
                        "the entry changed since it was stored", f"it was stored without {KEY_ENV}")
    if why is None:
        return None
    line = f"store entry {entry} not reused: {why}; the job runs again and its result replaces the entry"
    log.warning(line)
    return line


def _tree_body(folder: Path) -> dict:
    """What a compile folder's seal signs: its key (the folder's name) and the sha256 of each file under it by relative
    path (a link is named as one with its target, never followed, so a link pointed elsewhere after the seal breaks
    it; a link out of the folder vouches for files the seal does not cover, so the body then says only that
    (``LINK_OUT``) and the folder is never kept; nor is one of more than ``MAX_TREE_ENTRIES`` entries, whose body says
    only that)."""
    files, seen, inside = {}, 0, os.path.realpath(folder) + os.sep
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        seen += len(dirs) + len(names)
        if seen > MAX_TREE_ENTRIES:
            return {"format": FORMAT, "compile_key": folder.name, "files": f"more than {MAX_TREE_ENTRIES} entries"}
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = Path(root) / name
            rel = p.relative_to(folder).as_posix()
            if p.is_symlink() and not os.path.realpath(p).startswith(inside):
                return {"format": FORMAT, "compile_key": folder.name, "files": f"{LINK_OUT}: {rel}"}
            if rel != COMPILE_SEAL:
                files[rel] = (f"link to {os.readlink(p)}" if p.is_symlink()
                              else safeio.sha256(p, "run_file") if p.is_file() else "not a file")
    return {"format": FORMAT, "compile_key": folder.name, "files": files}


def _compile_entries(env) -> list[Path]:
    """Everything directly under the compile cache of the store the stage environment ``env`` names
    (``SUITE_STORE``), sorted; none without a store or a compile cache."""
    store = env.get(STORE_ENV)
    root = Path(store) / COMPILE_DIR if store else None
    return sorted(root.iterdir()) if root and root.is_dir() else []


def _compile_folders(env) -> list[Path]:
    """The compile key folders of the store the stage environment ``env`` names (``SUITE_STORE``)."""
    return [p for p in _compile_entries(env) if p.is_dir() and not p.is_symlink()]


def check_compile_store(env) -> list[str]:
    """Delete each compile folder of the run's store (``env``: the stages' environment, which names it) whose seal
    does not verify (none, another key's, changed since): a line for each (its configuration starts cold and is
    sealed again at the run's end). Nothing without the key."""
    secret = os.environ.get(KEY_ENV)
    if not secret:
        return []
    lines = []
    for odd in [p for p in _compile_entries(env) if p.is_symlink() or not p.is_dir()]:
        odd.unlink()  # the suite writes only folders there: a link would lead an engine's caches past the seal
        lines.append(f"compile store entry {odd} deleted: not a folder the suite wrote (a link or a file)")
        log.warning(lines[-1])
    for folder in _compile_folders(env):
        body = _tree_body(folder)
        why = body["files"] if str(body["files"]).startswith(LINK_OUT) else _seal_problem(
            folder / COMPILE_SEAL, lambda b=body: b, secret,
            "the folder changed since it was sealed", f"it was filled without {KEY_ENV}")
        if why:
            shutil.rmtree(folder, ignore_errors=True)
            lines.append(f"compile store folder {folder} deleted: {why}; its configuration starts cold")
            log.warning(lines[-1])
    return lines


def seal_compile_store(env) -> int:
    """Seal every compile folder of the run's store (``env`` names it) as it is now (after the run's jobs); the
    number sealed, 0 without the key."""
    secret = os.environ.get(KEY_ENV)
    if not secret:
        return 0
    folders = _compile_folders(env)
    for folder in folders:
        _write_seal(folder / COMPILE_SEAL, _tree_body(folder), secret)
    return len(folders)


class CompileStore:
    """The compile store of one run (``env`` names it; nothing to do without a store): ``check`` takes
    ``<store>/compile-cache.lock`` and, with the key, deletes the folders whose seal fails; ``seal`` seals every
    folder; ``release`` drops the lock (idempotent; the system drops it too when the process ends, so a killed run
    leaves no stale lock). A run with ``SUITE_MANIFEST_KEY`` takes the lock alone (it deletes and seals); one
    without takes it shared, so runs without the key go side by side and a keyed run's check never deletes a live
    run's folders. While another run holds it, ``note`` says so (who took it last, from ``compile-cache.lock.json``,
    and again every ``WAIT_NOTE_S``) and this waits; ``waited_s`` is how long."""

    def __init__(self, env, note=lambda line: None, owner: str = ""):
        store = env.get(STORE_ENV)
        self.env, self.note, self.owner, self._held, self.waited_s = env, note, owner, None, 0.0
        self.path = Path(store) / LOCK_NAME if store else None
        self.alone = bool(os.environ.get(KEY_ENV))

    def check(self) -> list[str]:
        if self._held is not None:
            raise RuntimeError("CompileStore.check called twice without release")
        if self.path is not None:
            self._held, self.waited_s = _lock(self.path, self.alone, self.note, self.owner)
        try:
            return check_compile_store(self.env)
        except BaseException:
            self.release()
            raise

    def seal(self) -> int:
        return seal_compile_store(self.env)

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            os.close(held)  # closing the descriptor releases its flock


WAIT_NOTE_S = 300  # how often a waiting run says again that it waits


def _lock(path: Path, alone: bool, note, owner: str) -> tuple[int, float]:
    """A descriptor holding ``path``'s flock (exclusive when ``alone``, else shared) and the seconds waited for it.
    Opened read-only (a flock needs no write access; a team's store is shared by several users), never through a
    link (a link or a folder there is refused with a line naming it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise SuiteError(Problem(str(path), "", f"the compile store's lock cannot be opened ({e.strerror})",
                                 "it must be a plain file, or absent, in a folder this user can write: remove what "
                                 "is there")) from None
    mode, start, said = (fcntl.LOCK_EX if alone else fcntl.LOCK_SH), time.monotonic(), None
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if said is None or waited - said >= WAIT_NOTE_S:
                    said = waited
                    note(f"waiting for {path} ({waited:.0f} s so far): another run is using this compile store"
                         f"{_holder(path)}; a sealed store serves one run at a time (give a concurrent job its own "
                         "SUITE_STORE)")
                time.sleep(0.5)
    except BaseException:
        os.close(fd)
        raise
    if alone:
        _write_holder(path, owner)
    return fd, time.monotonic() - start


def _holder(path: Path) -> str:
    """Who took the lock last, as its holder wrote it (a hint, read with a bound; nothing when unreadable)."""
    try:
        data = safeio.read_json(path.with_name(path.name + ".json"), "state")
    except (OSError, ValueError, RecursionError, SuiteError):
        return ""
    return f" (last taken by {data['owner']})" if isinstance(data, dict) and isinstance(data.get("owner"), str) else ""


def _write_holder(path: Path, owner: str) -> None:
    try:
        atomic.write(path.with_name(path.name + ".json"), json.dumps({"owner": owner[:500]}))
    except OSError as e:  # a hint for waiters only
        log.warning("the compile store's lock holder not recorded: %s", e)
