"""The safe reader (suite.runtime.safeio): regular files only, a size, line and nesting cap per kind, bounded walks;
and a walk over suite/ that fails on a raw read that does not go through it."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from conftest import within
from suite.runtime import safeio
from suite.runtime.errors import SuiteError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    yield path
    try:  # a reader that did block would be let go by a writer
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


READERS = {
    "read_bytes": lambda p: safeio.read_bytes(p, "record"),
    "read_text": lambda p: safeio.read_text(p, "record"),
    "read_json": lambda p: safeio.read_json(p, "record"),
    "read_yaml": lambda p: safeio.read_yaml(p, "task"),
    "iter_jsonl": lambda p: list(safeio.iter_jsonl(p, "dataset")),
    "open_text": lambda p: safeio.open_text(p, "dataset").read(),
    "sha256": lambda p: safeio.sha256(p, "weights"),
    "regular": lambda p: safeio.regular(p, "weights"),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_dev_zero_is_refused_without_reading(reader):
    with pytest.raises(safeio.UnsafeRead, match=r"^/dev/zero: a device, not a regular file"):
        within(10, READERS[reader], "/dev/zero")


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_promptly(reader, fifo):
    with pytest.raises(safeio.UnsafeRead, match="a FIFO, not a regular file"):
        within(10, READERS[reader], fifo)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_link_to_a_device_and_a_folder_are_refused(reader, tmp_path):
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(safeio.UnsafeRead, match="a device"):
        within(10, READERS[reader], tmp_path / "zero")
    with pytest.raises(safeio.UnsafeRead, match="a directory"):
        within(10, READERS[reader], tmp_path)


def test_a_missing_file_is_still_file_not_found(tmp_path):
    """Callers keep their own message for a missing file (FileNotFoundError, as the plain readers raise it)."""
    with pytest.raises(FileNotFoundError):
        safeio.read_json(tmp_path / "none.json", "record")


def test_the_refusal_is_a_suite_error_of_one_line_naming_the_file():
    with pytest.raises(SuiteError) as info:
        safeio.read_bytes("/dev/zero", "policy")
    assert len(info.value.problems) == 1 and "\n" not in str(info.value)
    assert str(info.value).startswith("/dev/zero: ") and "(fix: " in str(info.value)


def test_a_file_over_its_kinds_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(safeio.KINDS, "record", safeio.Limits("run record", 1000))
    (tmp_path / "big.json").write_text("[" + "1," * 600 + "1]")
    with pytest.raises(safeio.UnsafeRead, match="1,203 bytes: larger than the 1000 bytes a run record may hold"):
        safeio.read_json(tmp_path / "big.json", "record")
    (tmp_path / "small.json").write_text("[1]")
    assert safeio.read_json(tmp_path / "small.json", "record") == [1]


def test_a_gzip_bomb_is_capped_by_what_it_holds(tmp_path, monkeypatch):
    monkeypatch.setitem(safeio.KINDS, "dataset", safeio.Limits("dataset file", 100_000, max_line=1000))
    bomb = tmp_path / "rows.jsonl.gz"
    bomb.write_bytes(gzip.compress(b'{"prompt": "x"}\n' * 20_000))  # 320 KB inside, ~1 KB on disk
    assert bomb.stat().st_size < 100_000
    with pytest.raises(safeio.UnsafeRead, match="larger than"):
        list(safeio.iter_jsonl(bomb, "dataset"))
    small = tmp_path / "ok.jsonl.gz"
    small.write_bytes(gzip.compress(b'{"prompt": "x"}\n\n{"prompt": "y"}\n'))
    assert [r["prompt"] for r in safeio.iter_jsonl(small, "dataset")] == ["x", "y"]


def test_a_line_over_the_line_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(safeio.KINDS, "dataset", safeio.Limits("dataset file", 1 << 20, max_line=100))
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n' + '{"b": "' + "x" * 200 + '"}\n')
    with pytest.raises(safeio.UnsafeRead, match="line 2: longer than 100 bytes"):
        list(safeio.iter_jsonl(tmp_path / "a.jsonl", "dataset"))


@pytest.mark.parametrize("depth", [200_000, 65])
def test_deep_json_is_refused_before_it_is_parsed(tmp_path, depth):
    (tmp_path / "config.json").write_text("[" * depth + "]" * depth)
    with pytest.raises(safeio.UnsafeRead, match="JSON nested more than 64 levels deep"):
        safeio.read_json(tmp_path / "config.json", "model_config")


def test_deep_jsonl_line_is_refused_naming_the_line(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"a": 1}\n' + '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(safeio.UnsafeRead, match=r"d.jsonl: line 2: JSON nested more than"):
        list(safeio.iter_jsonl(tmp_path / "d.jsonl", "dataset"))


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"code": "[" * 500 + "]]]" + "{" * 300, "list": [[[1]]]})
    assert safeio.json_depth(text) == 4  # the object and the three lists
    assert safeio.loads_json(text, "x.json", "model_config")["list"] == [[[1]]]
    hidden = "[" * 70 + json.dumps("]" * 70) + "]" * 70  # closing brackets in a string cannot hide real depth
    with pytest.raises(safeio.UnsafeRead):
        safeio.loads_json(hidden, "x.json", "model_config")


def test_json_at_the_cap_is_read():
    assert safeio.loads_json("[" * 64 + "]" * 64, "x.json", "model_config") is not None


@pytest.mark.parametrize("text", ["[" * 20_000 + "]" * 20_000,
                                  "a:\n" + "".join("  " * i + "- \n" for i in range(1, 80))])
def test_deep_yaml_is_refused_before_it_is_composed(tmp_path, text):
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(safeio.UnsafeRead, match="YAML nested more than 64 levels deep"):
        safeio.read_yaml(tmp_path / "t.yaml", "task")


def test_a_link_out_of_the_named_roots_is_refused(tmp_path):
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (inside / "ok.json").write_text("{}")
    (inside / "link.json").symlink_to(outside / "secret.json")
    assert safeio.read_json(inside / "ok.json", "record", roots=[inside]) == {}
    with pytest.raises(safeio.UnsafeRead, match="outside"):
        safeio.read_json(inside / "link.json", "record", roots=[inside])
    assert safeio.read_json(inside / "link.json", "record") == {}  # no roots named: links are followed


@pytest.mark.parametrize("folder", ["/", "/proc", "/sys/kernel", "/dev"])
def test_walking_a_system_folder_is_refused(folder):
    """Refused by name: how many entries /proc holds depends on how many processes the host runs."""
    with pytest.raises(safeio.UnsafeRead, match="the root or a system folder"):
        within(60, safeio.walk_files, folder, "*.yaml")


def test_a_walk_of_too_many_entries_is_refused(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i}.yaml").write_text("")
    with pytest.raises(safeio.UnsafeRead, match="more than 20 entries"):
        safeio.walk_files(tmp_path, "*.yaml", max_entries=20)


def test_a_walk_is_bounded_in_depth_and_ends_a_link_loop(tmp_path):
    deep = tmp_path / "deep"
    (deep / Path(*["d"] * 20)).mkdir(parents=True)
    with pytest.raises(safeio.UnsafeRead, match="16 levels deep"):
        safeio.walk_files(deep)
    loop = tmp_path / "loop"
    (loop / "a").mkdir(parents=True)
    (loop / "a" / "t.yaml").write_text("task: x")
    (loop / "a" / "back").symlink_to(loop)
    assert safeio.walk_files(loop, "*.yaml", follow_links=True) == [loop / "a" / "t.yaml"]


def test_a_capped_stream_seeks():
    """The start-up log window seeks to where it began (suite.runtime.engine.startlog)."""
    with safeio.open_bytes(__file__, "code", gz=False) as fh:
        fh.seek(3)
        assert fh.read(3) == Path(__file__).read_bytes()[3:6]


# ------------------------------------------------------------------ every reader in suite/ goes through safeio

# A read call in suite/ that does not name safeio on its line. Writes (a mode of "w", "a", "x" or O_WRONLY) and
# processes (subprocess.Popen) are not reads.
RAW_READ = re.compile(r"\bopen\(|json\.loads?\(|yaml\.(?:safe_)?load(?:_all)?\(|\.read_text\(|\.read_bytes\(|"
                      r"gzip\.open\(|safe_open\(|\.readlines\(|urlopen\(")
NOT_A_READ = re.compile(r"""subprocess\.Popen\(|pidfd_open\(|def _open\(|, "[wax]b?"|"[wax]b?", |O_WRONLY|O_RDWR""")

# (file, a fragment of the line, why it is not routed through safeio). A stale entry fails the test.
ALLOWED: list[tuple[str, str, str]] = [
    ("suite/records/base.py", "data = json.loads(self.model_dump_json(",
     "a record serialised by pydantic in this process and parsed back to put schema_version first: not a file"),
    ("suite/recipe/load.py", "yaml.load(text, Loader=_UniqueKeyLoader)",
     "parses text read by safeio, after its own depth check (load_yaml's _nesting_depth_problem, MAX_DEPTH)"),
    ("suite/stages/evaluate/sandbox/score.py", "fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK",
     "score-code's own bounded reader: stat before the open, O_NONBLOCK, fstat after, 64 MiB, 1 MiB lines, .gz "
     "counted decompressed (safeio's rules; its JSON goes through safeio.loads_json)"),
    ("suite/stages/evaluate/sandbox/score.py", 'raw = open(fd, "rb")', "the descriptor _open_regular checked"),
    ("suite/stages/benchmark/client.py", 'json.loads(line.decode())["rc"]',
     "an answer on the pipe from the suite's own client worker, not a file"),
    ("suite/stages/benchmark/client.py", "job = json.loads(line)",
     "a job on the worker's stdin, written by the suite's own stage process, not a file"),
    ("suite/stages/benchmark/server.py", "urllib.request.urlopen(req, timeout=timeout)",
     "HTTP from the stage's own vllm serve on loopback, behind the run's API key"),
    ("suite/stages/benchmark/server.py", 'listing = json.loads(body or b"{}")', "that server's /v1/models answer"),
    ("suite/stages/benchmark/server.py", "urllib.request.urlopen(req, timeout=30)", "the same server's endpoint"),
    ("suite/stages/benchmark/server.py", 'json.loads(body or b"{}").get("success")', "that endpoint's answer"),
    ("suite/stages/benchmark/bottleneck.py", "urllib.request.urlopen(self.url, timeout=2)",
     "the same server's /metrics"),
    ("suite/outputs/mlflow_http.py", 'urllib.request.urlopen(uri.rstrip("/") + "/health"',
     "a health probe of the tracking server: the body is not read"),
    ("suite/runtime/kvbias.py", "``safetensors.safe_open(path", "the module docstring"),
    ("suite/orchestrate/store_seal.py", "fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW",
     "the compile store's lock: opened to hold a flock on it, never read"),
]


def _raw_reads() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted((ROOT / "suite").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "suite/runtime/safeio.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if RAW_READ.search(line) and "safeio." not in line and not NOT_A_READ.search(line):
                found.append((rel, n, line.strip()))
    return found


def test_every_read_in_suite_goes_through_the_safe_reader():
    raw = _raw_reads()
    unexplained = [f"{rel}:{n}: {line}" for rel, n, line in raw
                   if not any(rel == f and frag in line for f, frag, _ in ALLOWED)]
    assert not unexplained, ("a read that does not go through suite.runtime.safeio (route it, or add it to ALLOWED "
                             "with its reason):\n" + "\n".join(unexplained))
    stale = [f"{f}: {frag}" for f, frag, _ in ALLOWED if not any(rel == f and frag in line for rel, _, line in raw)]
    assert not stale, "ALLOWED entries that match no raw read any more (remove them):\n" + "\n".join(stale)
