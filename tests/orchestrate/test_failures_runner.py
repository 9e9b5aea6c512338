"""What happens to a run when a process dies: stage trees die with `suite run` (kill -9 included), a run
folder is locked while a run of it is alive (pid, host, boot id), an orphan cannot overwrite results,
run folders are unique under concurrency, and a complete checkpoint is never replaced under a reader."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from suite.runtime import lock as runlock
from suite.runtime import procs
from suite.runtime.envs import SERVE_PYTHON_ENV


def gone(pids: list[int], within_s: float) -> list[int]:
    """The pids still alive after ``within_s`` (zombies count as gone)."""
    deadline = time.monotonic() + within_s
    while True:
        left = [p for p in pids if procs.alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_kill_9_of_the_runner_takes_the_stage_tree_with_it(tmp_path):
    """A stage with an engine-core-like child, a child in its own process group (like `vllm serve`'s) and
    a double-forked setsid daemon; the process running it is killed with SIGKILL: none may survive."""
    pids = tmp_path / "pids"
    stage = tmp_path / "stage-python"
    stage.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""
        import os, subprocess, sys, time
        if sys.argv[1:2] == ["-c"]:
            os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
        kids = [subprocess.Popen(["sleep", "301"]).pid,
                subprocess.Popen(["sleep", "302"], process_group=0).pid]
        if os.fork() == 0:  # a daemon: double fork + setsid, reparented away from the stage
            os.setsid()
            if os.fork() == 0:
                open({str(pids)!r} + ".daemon", "w").write(str(os.getpid()))
                time.sleep(303)
            os._exit(0)
        while not os.path.exists({str(pids)!r} + ".daemon"):
            time.sleep(0.05)
        open({str(pids)!r}, "w").write(" ".join(map(str, [os.getpid(), *kids])))
        time.sleep(300)
    """))
    stage.chmod(0o755)
    driver = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from suite.records.evaluate import EngineConfig
        from suite.records.evaluate import EvaluateConfig
        from suite.orchestrate.jobs import run_stage
        cfg = EvaluateConfig(engine=EngineConfig(model="m"), tasks=[], data_dir="/", include_path="/", output_dir="/tmp")
        run_stage("evaluate", cfg, Path({str(tmp_path / 'v')!r}), dict(os.environ))
    """)
    runner = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, env={**os.environ, SERVE_PYTHON_ENV: str(stage)})
    deadline = time.monotonic() + 60
    while not pids.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pids.is_file(), "the fake stage never started"
    tree = [int(p) for p in pids.read_text().split()] + [int(Path(str(pids) + ".daemon").read_text())]
    assert all(procs.alive(p) for p in tree)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    left = gone(tree, within_s=5)
    for p in left:  # do not leave them to the next test
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes of the stage outlived `suite run`: {left}"


def hold_lock(run_dir: Path) -> subprocess.Popen:
    code = (f"import time; from suite.runtime.lock import RunLock; RunLock({str(run_dir)!r}).acquire(); "
            "print('held', flush=True); time.sleep(300)")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_resume_refuses_while_the_run_is_alive_and_takes_over_a_dead_ones_lock(tmp_path, demo_recipe_copy):
    run_dir = tmp_path / "runs" / "20261130-000000-demo-cpu"
    run_dir.mkdir(parents=True)
    recipe = demo_recipe_copy()
    (run_dir / "recipe.yaml").write_text(recipe.read_text())
    (run_dir / "plan.json").write_text(json.dumps({"recipe_path": str(recipe)}))
    holder = hold_lock(run_dir)
    try:
        held = json.loads((run_dir / "run.lock").read_text())
        assert held["pid"] == holder.pid and held["host"] == socket.gethostname()
        assert held["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip() and held["token"]
        res = run_cli("run", "--resume", str(run_dir))
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"is in use by `suite run` pid {holder.pid}" in res.stderr and "fix:" in res.stderr
        with pytest.raises(runlock.RunLockedError):
            runlock.RunLock(run_dir).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = runlock.RunLock(run_dir).acquire()  # its holder is dead: a stale lock is taken over
    assert lock.taken_over["pid"] == holder.pid and lock.owned()
    lock.release()
    assert not (run_dir / "run.lock").exists()


def write_lock(run_dir: Path, **fields) -> None:
    base = {"pid": os.getpid(), "create_time": procs.create_time(os.getpid()), "host": socket.gethostname(),
            "boot_id": runlock.boot_id(), "token": "old"}
    (run_dir / "run.lock").write_text(json.dumps(base | fields))


def test_a_lock_from_another_boot_or_host_is_not_taken_for_a_live_run(tmp_path):
    # the pid in these locks is alive here (it is ours), but it was recorded on another boot / machine
    write_lock(tmp_path, boot_id="0e8c-another-boot")
    assert runlock.RunLock(tmp_path).acquire().taken_over["boot_id"] == "0e8c-another-boot"
    write_lock(tmp_path, host="a-lost-machine")
    assert runlock.RunLock(tmp_path).acquire().taken_over["host"] == "a-lost-machine"
    write_lock(tmp_path)  # the same pid on this host and boot: alive, refused
    with pytest.raises(runlock.RunLockedError, match="in use by `suite run` pid"):
        runlock.RunLock(tmp_path).acquire()


def test_resume_refuses_while_an_orphaned_stage_of_the_run_is_alive(tmp_path):
    stage = subprocess.Popen(["sleep", "300"])
    try:
        write_lock(tmp_path, pid=2 ** 22 + 7, create_time=1.0, stage="evaluate fp8-kv", stage_pid=stage.pid,
                   stage_create_time=procs.create_time(stage.pid))
        with pytest.raises(runlock.RunLockedError, match=f"evaluate fp8-kv process pid {stage.pid}"):
            runlock.RunLock(tmp_path).acquire()
    finally:
        stage.kill()
        stage.wait()
    assert runlock.RunLock(tmp_path).acquire().taken_over["stage_pid"] == stage.pid


def test_an_orphan_stage_may_not_write_its_result_after_the_run_was_taken_over(tmp_path, monkeypatch):
    first = runlock.RunLock(tmp_path).acquire()
    monkeypatch.setenv(runlock.RUN_LOCK_ENV, str(first.path))
    monkeypatch.setenv(runlock.RUN_TOKEN_ENV, first.token)
    assert runlock.result_allowed() is None  # the stage of the run that owns the folder
    write_lock(tmp_path, pid=2 ** 22 + 7, token=first.token)  # that run died (its lock is stale) ...
    second = runlock.RunLock(tmp_path).acquire()  # ... and a resume took the folder over
    assert "taken over" in runlock.result_allowed()
    second.release()
    assert "is gone" in runlock.result_allowed()


def test_the_stage_entry_point_refuses_to_write_for_a_run_that_is_not_the_owner(tmp_path):
    """`python -m suite.stages` itself: a (cheap, real) quantize stage whose checkpoint already exists,
    started with the token of a run that no longer owns the folder, writes no result."""
    from suite.runtime.ckptfiles import COMPLETE_MARK, content_sha256
    from suite.records.quantize import QuantizeConfig, QuantizeResult

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_text("w")
    QuantizeResult(checkpoint=str(ckpt), key="k", cache_hit=False, wall_s=1.0,
                   content_sha256=content_sha256(ckpt)).write(ckpt / "quantize_result.json")
    (ckpt / COMPLETE_MARK).write_text("k")
    cfg = QuantizeConfig(model="m", checkpoint_dir=str(ckpt), key="k").write(tmp_path / "quantize.config.json")
    lock = runlock.RunLock(tmp_path).acquire()
    env = {**os.environ, **lock.env(), "PYTHONPATH": str(ROOT)}
    out = tmp_path / "quantize.result.json"
    ok = subprocess.run([sys.executable, "-m", "suite.stages", "quantize", str(cfg), str(out)], env=env,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and out.is_file(), ok.stderr
    out.unlink()
    runlock.RunLock(tmp_path)._write({**runlock.RunLock.read(lock.path), "pid": 1, "token": "someone-else"})
    refused = subprocess.run([sys.executable, "-m", "suite.stages", "quantize", str(cfg), str(out)], env=env,
                             capture_output=True, text=True)
    assert refused.returncode == 3 and not out.exists()
    assert "result not written: the run folder was taken over" in refused.stderr


def test_two_runs_of_one_recipe_in_the_same_second_get_two_folders(tmp_path, demo_recipe_copy):
    from suite.recipe import load_recipe
    from suite.orchestrate.rundir import new_run_dir

    loaded = load_recipe(demo_recipe_copy())
    barrier = threading.Barrier(8)
    made, errors = [], []

    def one():
        barrier.wait()
        try:
            made.append(new_run_dir(loaded, tmp_path / "runs"))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(made)) == 8 and all(d.is_dir() for d in made)


def checkpoint(folder: Path, weights: str) -> Path:
    from suite.stages.quantize.stage import COMPLETE_MARK

    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text(weights)
    (folder / COMPLETE_MARK).write_text("key")
    return folder


def test_a_complete_checkpoint_is_never_replaced_under_a_reader(tmp_path):
    from suite.stages.quantize.stage import finalize

    final = checkpoint(tmp_path / "fp8-key", "weights")
    reader = open(final / "model.safetensors")  # a reader (vLLM loading it) holds the folder
    inode = (final / "model.safetensors").stat().st_ino
    tmp = checkpoint(tmp_path / "fp8-key.tmp-1", "weights")
    assert finalize(tmp, final) is False
    assert not tmp.exists() and (final / "model.safetensors").stat().st_ino == inode
    assert reader.read() == "weights"

    stale = tmp_path / "fp8-other"
    stale.mkdir()
    (stale / "half-written").write_text("x")  # no completion mark: not a checkpoint anyone reads
    assert finalize(checkpoint(tmp_path / "fp8-other.tmp-2", "new"), stale) is True
    assert (stale / "model.safetensors").read_text() == "new" and not (stale / "half-written").exists()


def test_concurrent_finalizers_leave_one_complete_checkpoint(tmp_path):
    from suite.stages.quantize.stage import finalize, is_complete

    final = tmp_path / "fp8-key"
    tmps = [checkpoint(tmp_path / f"fp8-key.tmp-{i}", "weights") for i in range(6)]
    barrier = threading.Barrier(len(tmps))
    won = []

    def one(t):
        barrier.wait()
        won.append(finalize(t, final))

    threads = [threading.Thread(target=one, args=(t,)) for t in tmps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 5 + [True] and is_complete(final)
    assert [p.name for p in tmp_path.iterdir()] == ["fp8-key"]


@pytest.mark.parametrize("content", ["[]", "1", '{"pid": "abc"}', '{"create_time": "x", "pid": 5}', '{"pid": -1}',
                                     '{"pid": true, "host": "h", "boot_id": "b", "token": "t"}', "not json"])
def test_a_corrupt_or_tampered_lock_is_taken_over_without_a_traceback(tmp_path, content):
    """Found by an adversarial review: these lock files raised AttributeError/TypeError in acquire."""
    lock_file = tmp_path / runlock.LOCK_NAME
    lock_file.write_text(content)
    old = time.time() - 60
    os.utime(lock_file, (old, old))  # not one being written right now
    lock = runlock.RunLock(tmp_path).acquire()
    try:
        assert lock.taken_over and lock.owned()
    finally:
        lock.release()
