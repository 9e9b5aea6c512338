"""The one atomic writer (suite.runtime.atomic): whole files or none, never through a planted link, a full disk named,
and every rename-into-place in suite/ going through it."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from suite.records.base import JobStamp
from suite.runtime import atomic

ROOT = Path(__file__).resolve().parents[2]


def test_bytes_text_and_a_filler_are_written_whole_and_readable(tmp_path):
    for content, want in ((b"\x00\x01", b"\x00\x01"), ("é", "é".encode()), (lambda f: f.write(b"filled"), b"filled")):
        path = atomic.write(tmp_path / "f.bin", content)
        assert path.read_bytes() == want
        assert stat.S_IMODE(path.stat().st_mode) == atomic.MODE == 0o666 & ~_umask()  # not mkstemp's 0600
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]  # no temporary file left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_mode_is_what_open_would_give_under_the_umask(tmp_path):
    """mkstemp makes 0600; the writer gives what ``open(path, "w")`` gives (0666 less the umask), read at import."""
    code = ("import os, stat, sys; from suite.runtime import atomic; atomic.write(sys.argv[1], 'x'); "
            "print(oct(stat.S_IMODE(os.stat(sys.argv[1]).st_mode)))")
    for mask, want in ((0o077, "0o600"), (0o002, "0o664")):
        out = subprocess.run([sys.executable, "-c", f"import os; os.umask({mask}); " + code, str(tmp_path / "f")],
                             capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()
        assert out == want, (oct(mask), out)


def test_a_missing_folder_names_the_file_not_a_temporary(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        atomic.write(tmp_path / "missing" / "f.json", "{}")
    assert caught.value.filename == str(tmp_path / "missing" / "f.json")


def test_an_oserror_without_an_errno_keeps_its_type_and_message(tmp_path):
    import io

    def unsupported(_):
        raise io.UnsupportedOperation("not writable")  # an OSError and a ValueError, with no errno

    with pytest.raises(io.UnsupportedOperation, match="not writable"):
        atomic.write(tmp_path / "f", unsupported)
    assert list(tmp_path.iterdir()) == []


def test_a_link_planted_at_the_old_temporary_name_is_never_written_through(tmp_path):
    """Record.write used ``<file>.tmp``: a link placed there by whoever could write the run folder sent the record
    to the link's target. The writer's temporary name is random and made with O_EXCL."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (tmp_path / "summary.json.tmp").symlink_to(victim)
    JobStamp(variant="fp8", stage="evaluate", config_sha256="0" * 64).write(tmp_path / "summary.json")
    assert victim.read_text() == "untouched"
    assert json.loads((tmp_path / "summary.json").read_text())["variant"] == "fp8"


def test_a_link_at_the_path_itself_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (tmp_path / "out.json").symlink_to(victim)
    atomic.write(tmp_path / "out.json", "{}")
    assert victim.read_text() == "untouched" and not (tmp_path / "out.json").is_symlink()


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old")

    def full(_):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write to a full disk raises: no file named

    with pytest.raises(OSError) as caught:
        atomic.write(path, full)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")

    def interrupted(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.write(path, interrupted)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_readers_beside_concurrent_writers_see_only_whole_files(tmp_path):
    path = tmp_path / "progress.json"
    atomic.write(path, json.dumps({"n": -1}))
    stop, torn = threading.Event(), []

    def writer(k):
        for i in range(200):
            atomic.write(path, json.dumps({"n": i, "pad": "x" * (1000 * k)}))

    def reader():
        while not stop.is_set():
            try:
                json.loads(path.read_text())
            except ValueError as e:
                torn.append(e)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(k,)) for k in range(1, 4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not torn
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


# a file renamed into place anywhere in suite/ but the writer: os.replace, or Path.replace of a temporary
RENAME_INTO_PLACE = re.compile(r"os\.replace\(|\btmp\w*\.replace\(")


def test_every_file_renamed_into_place_in_suite_goes_through_the_writer():
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in sorted((ROOT / "suite").rglob("*.py")) if p.name != "atomic.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if RENAME_INTO_PLACE.search(line)]
    assert not found, "write through suite.runtime.atomic.write instead:\n" + "\n".join(found)
