"""Every public reader entry point fed /dev/zero, a FIFO and deep nesting (issue 47, "Reads without a bound"): each
ends promptly in exit 2 with one `error: FILE: ...` line and no traceback, never a MemoryError, a RecursionError or a
blocked read. A full or read-only disk is exit 2 naming the path too.

The command runs in process (``suite.cli.main``) in a thread the test waits on with a timeout: a reader that
blocked on a FIFO would fail the test instead of hanging it. Two cases go through a real ``python -m suite``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO_MODEL, ROOT, STALE, build_gated_run, needs_demo_model, within
from suite import cli

DEEP_JSON = "[" * 200_000 + "]" * 200_000
DEEP_YAML = "[" * 20_000 + "]" * 20_000
GATES = {"max_drop": {"suite_gsm8k": 0.05}, "min_throughput_gain": 1.2}


def _main(argv: list[str], capsys, seconds: float = 240) -> tuple[int, str]:
    """`suite ARGV` in process within ``seconds``: (exit code, stderr). An exception out of main (a traceback the user
    would see) is raised here; a reader still blocked after ``seconds`` fails the test."""
    return within(seconds, cli.main, argv), capsys.readouterr().err


def _refused(rc: int, err: str, names: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert "Traceback" not in err, err
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and names in errors[0], err


def _hostile(kind: str, path: Path, deep: str) -> None:
    """Put the hostile thing at ``path``: a link to /dev/zero, a FIFO, or ``deep`` text."""
    path.unlink(missing_ok=True)
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(deep)


KINDS = ["dev-zero", "fifo", "deep"]


# ------------------------------------------------------------------ suite validate: the recipe and what it names


@pytest.mark.parametrize("kind", KINDS)
def test_the_recipe_itself(kind, tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    _hostile(kind, recipe, DEEP_YAML)
    rc, err = _main(["validate", str(recipe)], capsys)
    _refused(rc, err, str(recipe))


@needs_demo_model()
@pytest.mark.parametrize("kind", KINDS)
def test_a_brought_checkpoints_config_json(kind, demo_recipe_copy, tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    for f in DEMO_MODEL.iterdir():
        (model / f.name).symlink_to(f)
    _hostile(kind, model / "config.json", DEEP_JSON)
    recipe = demo_recipe_copy(model__id=str(model))
    rc, err = _main(["validate", str(recipe)], capsys)
    _refused(rc, err, str(model))


@needs_demo_model()
@pytest.mark.parametrize("kind", KINDS)
def test_a_dataset_workload(kind, demo_recipe_copy, tmp_path, capsys):
    data = tmp_path / "traffic.jsonl"
    deep_line = '{"prompt": "p", "output_len": 8}\n{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    _hostile(kind, data, deep_line)
    recipe = demo_recipe_copy(throughput__workload="dataset",
                              throughput__dataset={"path": str(data), "format": "jsonl"})
    rc, err = _main(["validate", str(recipe)], capsys)
    _refused(rc, err, str(data))


@needs_demo_model()
@pytest.mark.parametrize("kind", KINDS)
def test_a_task_yaml_in_an_include_path(kind, demo_recipe_copy, tmp_path, capsys):
    folder = tmp_path / "team_tasks"
    folder.mkdir()
    _hostile(kind, folder / "team_task.yaml", DEEP_YAML)
    recipe = demo_recipe_copy(eval__include_path=str(folder))
    rc, err = _main(["validate", str(recipe)], capsys)
    _refused(rc, err, str(folder))  # deep: the file is named; a FIFO or a device is not read, so no task is found


@needs_demo_model()
@pytest.mark.parametrize("folder", ["/", "/proc"])
def test_an_include_path_of_a_system_folder(folder, demo_recipe_copy, capsys):
    recipe = demo_recipe_copy(eval__include_path=folder)
    rc, err = _main(["validate", str(recipe)], capsys)
    _refused(rc, err, f"error: {folder}: ")


# ------------------------------------------------------------------ suite gate: the policy and the run folder


@pytest.mark.parametrize("kind", KINDS)
def test_a_gate_policy(kind, tmp_path, capsys):
    s = build_gated_run(tmp_path, GATES)
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    policy = tmp_path / "policy.yaml"
    _hostile(kind, policy, DEEP_YAML)
    rc, err = _main(["gate", str(tmp_path / "run"), "--no-record", "--policy", str(policy)], capsys)
    _refused(rc, err, str(policy))


@pytest.mark.parametrize("kind", KINDS)
def test_summary_json(kind, tmp_path, capsys):
    """summary.json is a cache, never read for a verdict: a hostile one is not read past its bound and is said in
    one warning line; the verdict is the records' (the run passes)."""
    build_gated_run(tmp_path, GATES)
    summary = tmp_path / "run" / "summary.json"
    _hostile(kind, summary, DEEP_JSON)
    rc, err = _main(["gate", str(tmp_path / "run"), "--no-record"], capsys)
    assert rc == 0 and "Traceback" not in err and "error: " not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("warning: ")] == [
        f"warning: {STALE}: judged on the records; `suite summarize {tmp_path / 'run'}` rewrites it"], err


@pytest.mark.parametrize("kind", KINDS)
def test_a_stage_result_json(kind, tmp_path, capsys):
    s = build_gated_run(tmp_path, GATES)
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    result = tmp_path / "run" / "variants" / "fp8" / "evaluate.result.json"
    _hostile(kind, result, DEEP_JSON)
    rc, err = _main(["gate", str(tmp_path / "run"), "--no-record"], capsys)
    _refused(rc, err, "fp8")  # deep: the file is named; a FIFO or a device is no stage result: the variant's is missing


@pytest.mark.parametrize("kind", KINDS)
def test_the_signed_manifest(kind, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SUITE_MANIFEST_KEY", "k" * 32)
    s = build_gated_run(tmp_path, GATES)
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    manifest = tmp_path / "run" / "manifest.json"
    _hostile(kind, manifest, DEEP_JSON)
    rc, err = _main(["gate", str(tmp_path / "run"), "--no-record", "--verify"], capsys)
    _refused(rc, err, str(manifest))


def test_through_the_real_command(tmp_path):
    """`python -m suite`: a FIFO as the policy and /dev/zero as the recipe each end at once in one line, exit 2."""
    os.mkfifo(tmp_path / "policy.yaml")
    (tmp_path / "recipe.yaml").symlink_to("/dev/zero")
    for args in (("gate", str(tmp_path), "--policy", str(tmp_path / "policy.yaml")),
                 ("validate", str(tmp_path / "recipe.yaml"))):
        res = subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=240)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1, res.stderr


# ------------------------------------------------------------------ a full or read-only disk


class _FullDisk(io.StringIO):
    """An open file on a full disk: it opens, and every write fails with ENOSPC (whose error names no file)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_full_or_read_only_disk_is_exit_2_naming_the_path(code, tmp_path, capsys, monkeypatch):
    """Simulated, as the kernel fails each: on a full disk the open succeeds and the write fails, naming no file; on a
    read-only file system or a folder one may not write, the open fails naming the file. `suite summarize` writes
    the summary, the report and the rest."""
    s = build_gated_run(tmp_path, GATES)
    (tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    real_open = Path.open

    def broken_open(self, mode="r", *args, **kwargs):
        if not any(m in mode for m in "wax"):
            return real_open(self, mode, *args, **kwargs)
        if code == errno.ENOSPC:
            return _FullDisk(str(self))
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "open", broken_open)
    rc, err = _main(["summarize", str(tmp_path / "run")], capsys)
    monkeypatch.undo()
    assert rc == 2 and "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and os.strerror(code) in errors[0] and f"error: {tmp_path / 'run'}/" in errors[0], err


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs mounted for the test (root only, where mounting is permitted; skipped elsewhere)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode}): the simulated test covers it")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("how", ["full", "read-only"])
def test_a_real_full_or_read_only_tmpfs(how, tiny_tmpfs, capsys):
    run = tiny_tmpfs / "run"
    (run / "summary.json").write_text(json.dumps(build_gated_run(tiny_tmpfs, GATES, n=30)))
    if how == "full":
        with open(tiny_tmpfs / "filler", "wb", buffering=0) as fh:  # fill the disk to its last byte
            with pytest.raises(OSError, match="No space left"):
                while True:
                    fh.write(b"\0" * 4096)
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    rc, err = _main(["summarize", str(run)], capsys)
    assert rc == 2 and "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    what = os.strerror(errno.ENOSPC if how == "full" else errno.EROFS)
    assert len(errors) == 1 and what in errors[0] and f"error: {run}/" in errors[0], err
