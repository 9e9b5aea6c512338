"""The signed manifest (issue 40, part 1, CI across machines): a run folder signed with SUITE_MANIFEST_KEY verifies
with `suite gate --verify`; each tamper is refused (exit 2, naming the file); without --verify its absence is fine."""

from __future__ import annotations

import json

import pytest

from suite.outputs import manifest, sinks
from test_gate_recompute import TASK, build, gate
from test_gate_records import stage_results

KEY = "ci-secret"


def signed(tmp_path, monkeypatch) -> dict:
    s = build(tmp_path)
    stage_results(tmp_path, s)
    run = tmp_path / "run"
    (run / "summary.json").write_text(json.dumps(s))
    (run / "variants" / "fp8" / "benchmark").mkdir()
    (run / "variants" / "fp8" / "benchmark" / "bench-rate-inf-r0.json").write_text('{"output_throughput": 150}')
    monkeypatch.setenv(manifest.KEY_ENV, KEY)
    manifest.write(run, s["recipe_sha256"], KEY)
    return s


def verify(tmp_path, capsys, s):
    return gate(tmp_path, capsys, s, "--verify")


def test_a_signed_run_verifies_and_lists_its_result_files(tmp_path, monkeypatch, capsys):
    s = signed(tmp_path, monkeypatch)
    files = json.loads((tmp_path / "run" / "manifest.json").read_text())["files"]
    for name in ("summary.json", "recipe.yaml", "variants/fp8/evaluate.result.json",
                 "variants/fp8/benchmark/bench-rate-inf-r0.json", f"samples_fp8_{TASK}.jsonl"):
        assert name in files, files
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 0 and "gate: PASS" in out and "verified:" in err, out + err


@pytest.mark.parametrize("what", ["summary", "samples", "recipe", "hash list", "added", "removed"])
def test_each_tamper_is_refused(tmp_path, monkeypatch, capsys, what):
    s = signed(tmp_path, monkeypatch)
    run = tmp_path / "run"
    named = {"summary": run / "summary.json", "samples": run / f"samples_fp8_{TASK}.jsonl",
             "recipe": run / "recipe.yaml", "hash list": run / "manifest.json",
             "added": run / "variants" / "fp8" / "extra.result.json",
             "removed": run / "variants" / "fp8" / "benchmark" / "bench-rate-inf-r0.json"}[what]
    if what == "summary":
        s["finished"] = "2099-01-01T00:00:00+00:00"  # written by gate() below
    elif what == "hash list":
        m = json.loads(named.read_text())
        m["files"]["recipe.yaml"]["sha256"] = "0" * 64
        named.write_text(json.dumps(m))
    elif what == "added":
        named.write_text("{}")
    elif what == "removed":
        named.unlink()
    else:
        named.write_text(named.read_text() + "\n")
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 2 and "gate: PASS" not in out and str(named) in err, out + err


def test_a_wrong_key_and_no_key_are_refused(tmp_path, monkeypatch, capsys):
    s = signed(tmp_path, monkeypatch)
    monkeypatch.setenv(manifest.KEY_ENV, "not-the-ci-secret")
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 2 and "HMAC does not match" in err and "manifest.json" in err, out + err
    monkeypatch.delenv(manifest.KEY_ENV)
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 2 and f"{manifest.KEY_ENV} is not set" in err, out + err


def test_no_manifest_is_refused_only_with_verify(tmp_path, monkeypatch, capsys):
    s = build(tmp_path)
    monkeypatch.setenv(manifest.KEY_ENV, KEY)
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 2 and "no signed manifest" in err, out + err
    assert gate(tmp_path, capsys, s)[0] == 0


def test_tracking_state_does_not_invalidate_it(tmp_path, monkeypatch, capsys):
    """What `suite sync` / `suite gate` write back (the summary's tracking fields, tracking.json) is not signed."""
    s = signed(tmp_path, monkeypatch)
    s["tracking_pending"] = "server down"
    (tmp_path / "run" / "tracking.json").write_text("{}")
    code, out, err = verify(tmp_path, capsys, s)
    assert code == 0, out + err


def test_the_sink_signs_last_and_only_with_the_key(tmp_path, monkeypatch):
    assert sinks.SINKS[-1].name == sinks.MANIFEST
    sinks.register(sinks.Sink("later", lambda *a: None))
    try:
        assert sinks.SINKS[-1].name == sinks.MANIFEST and sinks.SINKS[-2].name == "later"
    finally:
        sinks.unregister("later")
    s = build(tmp_path)

    class Summ:
        recipe_sha256 = s["recipe_sha256"]
    runner = sinks.PublishContext(out_root=tmp_path, track=False, resumed=False, report=print, signs=True)
    monkeypatch.delenv(manifest.KEY_ENV, raising=False)
    manifest.write_sink(Summ, tmp_path / "run", runner)
    assert not (tmp_path / "run" / "manifest.json").exists()
    monkeypatch.setenv(manifest.KEY_ENV, KEY)
    rebuilt = sinks.PublishContext(out_root=tmp_path, track=False, resumed=True, report=print)  # not the runner
    manifest.write_sink(Summ, tmp_path / "run", rebuilt)
    assert not (tmp_path / "run" / "manifest.json").exists()
    manifest.write_sink(Summ, tmp_path / "run", runner)
    assert manifest.verify(tmp_path / "run") == 5  # recipe.yaml, 2 stage results, their samples
