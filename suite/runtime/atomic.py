"""The one atomic writer: a file is written whole to a new temporary file beside it, then renamed over it.

Every file the suite writes for another process to read (records and summaries a pack or `suite gate` may read while
a run goes on, progress, profiles, the run's lock, the store's caches and lock holder, the gate report) goes through
``write``, so that:

- a reader sees the old file or the new one, never half of one, and a writer killed mid-write leaves the old file;
- the temporary file is made by ``tempfile.mkstemp`` (``O_CREAT | O_EXCL``, a random name): a link or file someone
  placed at a predictable name such as ``summary.json.tmp`` is never written through, and concurrent writers of one
  file (threads of the local executor, two stages) never share a temporary file;
- a failed write (a full disk) removes its temporary file and raises ``OSError`` naming the file it was writing;
- the file is readable as a plain ``open(path, "w")`` under the usual umask makes it (0644), not mkstemp's 0600.

The rename is atomic within one file system (the temporary file is in the target's folder). There is no fsync: a
crash of the machine may lose the last write, which a re-run redoes; a crash of the process may not tear a file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Union

MODE = 0o644

Content = Union[bytes, str, Callable[[BinaryIO], None]]


def write(path, content: Content, mode: int = MODE) -> Path:
    """Write ``content`` (bytes, text as UTF-8, or a function that writes to the open binary file) to ``path``
    atomically; returns ``path``. The folder must exist. Raises OSError naming ``path`` when it cannot."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            if callable(content):
                content(out)
            else:
                out.write(content.encode() if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename is None:  # a full disk's error names no file: name it
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    return path
