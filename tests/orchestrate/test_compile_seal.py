"""The compile store's seal (suite.orchestrate.store_seal): with SUITE_MANIFEST_KEY, each compile key folder is sealed
by the parent after a run's jobs and checked before the next run's; a folder changed, added to, unsealed or sealed
with another key is deleted with one warning (its configuration starts cold), since a later engine start loads the
generated code and kernels in it. Without the key nothing is sealed or deleted."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from suite.orchestrate import store_seal
from suite.orchestrate.store_seal import COMPILE_SEAL, check_compile_store, seal_compile_store
from suite.outputs.manifest import KEY_ENV
from suite.runtime.errors import SuiteError


def filled(store: Path, key: str = "aac480a02a9c9c1b") -> Path:
    folder = store / "compile-cache" / key
    (folder / "inductor" / "ab" / "__pycache__").mkdir(parents=True)
    (folder / "inductor" / "ab" / "kernel.py").write_text("def call(): pass\n")
    (folder / "inductor" / "ab" / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\x00pyc")
    (folder / "vllm").mkdir()
    (folder / "vllm" / "graph.bin").write_bytes(b"graph")
    (folder / ".complete").write_text(json.dumps({"key": key}))
    return folder


def env(store: Path) -> dict[str, str]:
    return {"SUITE_STORE": str(store)}


def test_a_run_without_a_store_has_nothing_to_check(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "the-ci-secret")
    assert check_compile_store({}) == [] and seal_compile_store({}) == 0


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "the-ci-secret")


def test_a_sealed_folder_as_it_was_is_kept(tmp_path, key):
    folder = filled(tmp_path)
    assert seal_compile_store(env(tmp_path)) == 1 and (folder / COMPILE_SEAL).is_file()
    assert check_compile_store(env(tmp_path)) == [] and (folder / "vllm" / "graph.bin").is_file()


@pytest.mark.parametrize("tamper", ["edit", "add", "pyc", "unseal", "other_key", "link", "repoint"])
def test_a_folder_changed_after_its_seal_is_deleted_with_one_line(tmp_path, key, monkeypatch, tamper):
    folder = filled(tmp_path)
    other = filled(tmp_path, "c2a5b1bc1d722cea")
    if tamper == "repoint":  # a link that was there when sealed, pointed at other code after
        (tmp_path / "kernels-v1").mkdir()
        (folder / "triton-link").symlink_to(tmp_path / "kernels-v1")
    seal_compile_store(env(tmp_path))
    if tamper == "edit":
        (folder / "inductor" / "ab" / "kernel.py").write_text("import os; os.system('id')\n")
    elif tamper == "add":
        (folder / "triton").mkdir()
        (folder / "triton" / "new.so").write_bytes(b"\x7fELF")
    elif tamper == "pyc":  # Python loads a __pycache__ file before its source
        (folder / "inductor" / "ab" / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"\x00evil")
    elif tamper == "unseal":
        (folder / COMPILE_SEAL).unlink()
    elif tamper == "other_key":
        monkeypatch.setenv(KEY_ENV, "another-secret")
        seal_compile_store(env(tmp_path))
        monkeypatch.setenv(KEY_ENV, "the-ci-secret")
        other.joinpath(COMPILE_SEAL).unlink()  # only `folder` is judged below with a foreign seal
    elif tamper == "repoint":
        (folder / "triton-link").unlink()
        (folder / "triton-link").symlink_to(tmp_path / "elsewhere")
    elif tamper == "link":
        (folder / "vllm" / "graph.bin").unlink()
        (folder / "vllm" / "graph.bin").symlink_to(tmp_path / "elsewhere.bin")
    lines = check_compile_store(env(tmp_path))
    assert not folder.exists() and any(str(folder) in line and "starts cold" in line for line in lines), lines
    if tamper != "other_key":
        assert other.exists() and len(lines) == 1


def test_the_shared_jit_folder_is_sealed_and_judged_like_a_key_folder(tmp_path, key):
    """FlashInfer's and Triton's kernels (compile-cache/jit-<key>/, every configuration loads them) are shared
    libraries an engine loads: an .so swapped after the seal deletes the folder, not only the configuration's own."""
    configuration = filled(tmp_path)
    jit = tmp_path / "compile-cache" / "jit-5d1f0c2e9a7b3c41"
    (jit / "flashinfer" / ".cache" / "flashinfer" / "90a").mkdir(parents=True)
    (jit / "flashinfer" / ".cache" / "flashinfer" / "90a" / "sampling.so").write_bytes(b"\x7fELF built")
    assert seal_compile_store(env(tmp_path)) == 2 and (jit / COMPILE_SEAL).is_file()
    assert check_compile_store(env(tmp_path)) == []
    (jit / "flashinfer" / ".cache" / "flashinfer" / "90a" / "sampling.so").write_bytes(b"\x7fELF swapped")
    lines = check_compile_store(env(tmp_path))
    assert not jit.exists() and configuration.exists() and len(lines) == 1 and str(jit) in lines[0]


def test_a_link_out_of_a_folder_or_in_place_of_one_is_never_kept(tmp_path, key):
    """A link in a compile folder that leads out of it vouches for files no seal covers (sealed or not, the folder
    goes); a link or a file in place of a folder (a predictable jit-<key> pointed at other kernels) is deleted; a link
    inside a folder to a file of that folder is sealed like the file."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "sampling.so").write_bytes(b"\x7fELF theirs")
    leaking = filled(tmp_path)
    (leaking / "triton").symlink_to(outside)
    kept = filled(tmp_path, "c2a5b1bc1d722cea")
    (kept / "vllm" / "graph-latest.bin").symlink_to(kept / "vllm" / "graph.bin")
    (tmp_path / "compile-cache" / "jit-5d1f0c2e9a7b3c41").symlink_to(outside)
    (tmp_path / "compile-cache" / "stray.json").write_text("{}")
    seal_compile_store(env(tmp_path))
    lines = check_compile_store(env(tmp_path))
    assert not leaking.exists() and any("a link out of the folder: triton" in line for line in lines), lines
    assert not (tmp_path / "compile-cache" / "jit-5d1f0c2e9a7b3c41").is_symlink()
    assert not (tmp_path / "compile-cache" / "stray.json").exists() and len(lines) == 3, lines
    assert kept.exists() and (outside / "sampling.so").read_bytes() == b"\x7fELF theirs"  # never followed to delete


def test_without_the_key_nothing_is_sealed_or_deleted(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    folder = filled(tmp_path)
    assert seal_compile_store(env(tmp_path)) == 0 and check_compile_store(env(tmp_path)) == []
    assert folder.is_dir() and not (folder / COMPILE_SEAL).exists()


def test_a_store_without_compile_caches_is_nothing_to_check(tmp_path, key):
    assert check_compile_store(env(tmp_path / "absent")) == [] and seal_compile_store(env(tmp_path / "absent")) == 0


def test_too_many_entries_is_never_vouched_for(tmp_path, key, monkeypatch):
    """A folder over the bound is not walked for ever, and its seal, over a body that names no file, vouches for
    nothing: a file edited after it was sealed must not be kept on the strength of it."""
    monkeypatch.setattr(store_seal, "MAX_TREE_ENTRIES", 3)
    folder = filled(tmp_path)
    assert "more than 3 entries" in json.dumps(store_seal._tree_body(folder))
    seal_compile_store(env(tmp_path))
    (folder / "inductor" / "ab" / "kernel.py").write_text("import os; os.system('id')\n")
    lines = check_compile_store(env(tmp_path))
    assert not folder.exists() and "cannot be vouched for (more than 3 entries)" in lines[0], lines


def test_a_run_checks_the_store_before_its_jobs_and_seals_it_after(demo_recipe_copy, tmp_path, monkeypatch, key):
    """Through the runner: a stage (a stand-in) fills a compile folder; the run seals it; a file changed between runs
    makes the next run delete the folder before its jobs start, and say so in the summary's warnings."""
    from test_runner_stage import fake_stage

    from suite.orchestrate.runner import execute
    from suite.recipe import load_recipe
    from suite.records.quantize import QuantizeResult
    from suite.runtime.envs import QUANTIZE_PYTHON_ENV, SERVE_PYTHON_ENV

    seen = tmp_path / "seen.txt"
    quantized = QuantizeResult(checkpoint=str(tmp_path / "ckpt"), key="k", cache_hit=False, wall_s=1.0)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / ".complete").write_text("k")
    script = fake_stage(tmp_path, f"""
        import json
        stage, cfg = sys.argv[-3], json.load(open(sys.argv[-2]))
        folder = os.path.join(os.environ["SUITE_STORE"], "compile-cache", "k1")
        import fcntl
        lock = os.open(os.path.join(os.environ["SUITE_STORE"], "compile-cache.lock"), os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = "free"
        except BlockingIOError:
            held = "held"
        open({str(seen)!r}, "a").write(f"{{os.path.exists(os.path.join(folder, 'code.py'))}} "
                                       f"{{'{KEY_ENV}' in os.environ}} {{held}}\\n")
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "code.py"), "w").write("x = 1\\n")
        if stage == "quantize":
            result_json = json.dumps({{**json.loads({quantized.model_dump_json()!r}), "key": cfg["key"]}})
        write_result()
    """)
    monkeypatch.setenv(SERVE_PYTHON_ENV, script)
    monkeypatch.setenv(QUANTIZE_PYTHON_ENV, script)
    monkeypatch.setenv("SUITE_STORE", str(tmp_path / "store"))
    recipe = demo_recipe_copy(throughput=None, gates__min_throughput_gain=None)
    from suite.orchestrate import runner

    published, publish = [], runner.publish

    def publishing(*args, **kwargs):  # the store is let go once sealed, before the report and the tracking upload
        assert_free(tmp_path / "store" / store_seal.LOCK_NAME)
        published.append(True)
        return publish(*args, **kwargs)

    monkeypatch.setattr(runner, "publish", publishing)
    first = execute(load_recipe(recipe), report=lambda *e: None, track=False)
    assert published
    folder = tmp_path / "store" / "compile-cache" / "k1"
    assert (folder / COMPILE_SEAL).is_file(), first.warnings
    assert seen.read_text().split("\n")[0] == "False False held"  # the stage never holds the key; the run, the lock
    seen.write_text("")
    (folder / "code.py").write_text("import os\n")
    second = execute(load_recipe(recipe), report=lambda *e: None, track=False, force=True)  # the jobs run again
    assert seen.read_text().split("\n")[0] == "False False held"  # deleted before the first job started
    assert any("compile store folder" in w and "starts cold" in w for w in second.warnings), second.warnings
    assert_free(tmp_path / "store" / store_seal.LOCK_NAME)  # the run let go of the store when it ended


def assert_free(path: Path) -> None:
    with open(path, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError while a run holds it


def test_a_second_run_on_a_sealed_store_waits_for_the_first_to_seal(tmp_path, key):
    """Run A checks the store and its engine fills a folder not sealed yet; run B, started meanwhile, says that it
    waits (and who took the lock) and does not check (which would delete A's folder) until A has sealed and let go."""
    first = store_seal.CompileStore(env(tmp_path), owner="4242@ci-runner-7 /runs/20261207-a")
    notes, done, lines = [], threading.Event(), []
    assert first.check() == []
    folder = filled(tmp_path)  # A's engine writing; no seal yet
    second = store_seal.CompileStore(env(tmp_path), notes.append)
    thread = threading.Thread(target=lambda: (lines.extend(second.check()), done.set()))
    thread.start()
    while not notes and thread.is_alive():
        thread.join(0.05)
    assert len(notes) == 1 and "another run is using this compile store" in notes[0], notes
    assert "last taken by 4242@ci-runner-7 /runs/20261207-a" in notes[0], notes
    assert not done.wait(0.5) and (folder / "vllm" / "graph.bin").is_file()  # B still waits; A's folder is there
    assert first.seal() == 1
    first.release()
    thread.join(30)
    assert done.is_set() and lines == [] and (folder / "vllm" / "graph.bin").is_file()  # sealed by A, kept by B
    assert second.waited_s >= 0.5
    second.release()
    second.release()  # idempotent
    assert_free(tmp_path / store_seal.LOCK_NAME)


def test_a_killed_run_leaves_no_stale_store_lock(tmp_path, key):
    lock = tmp_path / store_seal.LOCK_NAME
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; h = open(sys.argv[1], 'a'); fcntl.flock(h, fcntl.LOCK_EX); print('held', flush=True);"
        " time.sleep(600)"), str(lock)], stdout=subprocess.PIPE, text=True)
    notes, run = [], store_seal.CompileStore(env(tmp_path), lambda line: notes.append(line))
    try:
        assert holder.stdout.readline().strip() == "held"
        waiting = threading.Thread(target=run.check)
        waiting.start()
        while not notes and waiting.is_alive():
            waiting.join(0.05)
        assert notes and waiting.is_alive()  # the live holder is waited for
    finally:
        holder.kill()
        holder.wait(30)
    waiting.join(30)
    assert not waiting.is_alive() and run._held is not None  # the system dropped the dead holder's lock
    run.release()


def test_runs_without_the_key_share_the_store_and_a_keyed_run_waits_for_them(tmp_path, monkeypatch):
    """Without the key nothing is deleted or sealed, so such runs take the lock shared and go side by side; a keyed
    run (which deletes unsealed folders) waits until none of them is running."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    one, two = store_seal.CompileStore(env(tmp_path)), store_seal.CompileStore(env(tmp_path))
    assert one.check() == [] and two.check() == [] and one.waited_s < 1 and two.waited_s < 1
    folder = filled(tmp_path)  # an unkeyed run's engine writing
    monkeypatch.setenv(KEY_ENV, "the-ci-secret")
    notes, keyed = [], store_seal.CompileStore(env(tmp_path), lambda line: notes.append(line))
    waiting = threading.Thread(target=keyed.check)
    waiting.start()
    while not notes and waiting.is_alive():
        waiting.join(0.05)
    assert notes and waiting.is_alive() and folder.is_dir()  # not deleted under a live run
    one.release()
    two.release()
    waiting.join(30)
    assert not waiting.is_alive() and not folder.exists()  # then judged: filled without the key, deleted
    keyed.release()


def test_a_failed_check_lets_go_of_the_lock(tmp_path, key, monkeypatch):
    def unreadable(env):
        raise PermissionError("compile-cache/aac480a02a9c9c1b/vllm: permission denied")

    monkeypatch.setattr(store_seal, "check_compile_store", unreadable)
    run = store_seal.CompileStore(env(tmp_path))
    with pytest.raises(PermissionError):
        run.check()
    assert run._held is None
    assert_free(tmp_path / store_seal.LOCK_NAME)


@pytest.mark.parametrize("planted", ["link", "folder"])
def test_a_link_or_folder_in_place_of_the_lock_is_refused_naming_it(tmp_path, key, planted):
    lock = tmp_path / store_seal.LOCK_NAME
    if planted == "link":
        (tmp_path / "elsewhere").write_text("")
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        lock.mkdir()
    with pytest.raises(SuiteError) as refused:
        store_seal.CompileStore(env(tmp_path)).check()
    assert str(lock) in str(refused.value) and "must be a plain file" in str(refused.value)
    assert (tmp_path / "elsewhere").read_text() == "" if planted == "link" else lock.is_dir()
