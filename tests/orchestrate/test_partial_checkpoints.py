"""A quantize that fails after it began writing its checkpoint leaves no partial ``...tmp-PID`` folder, and the
partial folders of writers that are gone are removed before the next build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from suite.stages.quantize.stage import partial_checkpoint, remove_stale_partials


def test_a_full_disk_while_writing_removes_the_partial_checkpoint(tmp_path):
    final = tmp_path / "checkpoints" / "fp8-abc"
    final.parent.mkdir()
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    with pytest.raises(OSError) as e:
        with partial_checkpoint(tmp):
            tmp.mkdir()
            (tmp / "config.json").write_text("{}")
            (tmp / "model.safetensors").write_bytes(b"\0" * 4096)
            shutil.copyfile(tmp / "model.safetensors", "/dev/full")  # a real ENOSPC, as a full disk gives
    assert e.value.errno == 28  # ENOSPC
    assert not tmp.exists() and list(final.parent.iterdir()) == []


def test_partials_of_dead_writers_are_removed_and_a_live_writers_kept(tmp_path):
    final = tmp_path / "fp8-abc"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = final.with_name(f"{final.name}.tmp-{int(dead.stdout)}")
    live = final.with_name(f"{final.name}.tmp-{os.getppid()}")  # our parent: alive
    other = tmp_path / "fp8-other.tmp-1"
    for d in (gone, live, other):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"x")
    assert remove_stale_partials(final) == [gone]
    assert not gone.exists() and live.exists() and other.exists()
