"""The one atomic writer: a file is written whole to a new temporary file beside it, then renamed over it.

Every file the suite writes for another process to read (records and summaries a pack or `suite gate` may read while
a run goes on, progress, profiles, the run's lock, the store's caches and lock holder, the gate report) goes through
``write``, so that:

- a reader sees the old file or the new one, never half of one, and a writer killed mid-write leaves the old file;
- the temporary file is made by ``tempfile.mkstemp`` (``O_CREAT | O_EXCL``, a random name): a link or file someone
  placed at a predictable name such as ``summary.json.tmp`` is never written through, and concurrent writers of one
  file (threads of the local executor, two stages) never share a temporary file;
- a failed write (a full disk) removes its temporary file and raises ``OSError`` naming the file it was writing;
- the file gets the mode a plain ``open(path, "w")`` gives it (0666 less the process's umask, read once at import),
  not mkstemp's 0600.

The rename is atomic within one file system (the temporary file is in the target's folder). There is no fsync: a
crash of the machine may lose the last write, which a re-run redoes; a crash of the process may not tear a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Union

def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: done once, at import, before any thread starts
    os.umask(mask)
    return mask


MODE = 0o666 & ~_umask()

Content = Union[bytes, str, Callable[[BinaryIO], None]]


def write(path, content: Content, mode: int = MODE) -> Path:
    """Write ``content`` (bytes, text as UTF-8, or a function that writes to the open binary file) to ``path``
    atomically; returns ``path``. The folder must exist. Raises OSError naming ``path`` when it cannot."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            if callable(content):
                content(out)
            else:
                out.write(content.encode() if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(e, OSError) and e.errno is not None and (e.filename is None or tmp in (None, e.filename)):
            raise OSError(e.errno, e.strerror, str(path)) from e  # name the file being written, not the temporary
        raise
    return path
