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
    assert list(sinks.SINKS)[-1] == sinks.MANIFEST
    sinks.register(sinks.Sink("later", lambda *a: None))
    try:
        assert list(sinks.SINKS)[-2:] == ["later", sinks.MANIFEST]
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
    assert manifest.verify(tmp_path / "run") == 13  # recipe, plan, run.json, 2 x 2 stage files, 2 samples


def test_a_copied_folder_verifies(tmp_path, monkeypatch, capsys):
    """The manifest names files relative to the run folder: a copy elsewhere, the original gone, verifies."""
    import shutil

    s = signed(tmp_path, monkeypatch)
    names = json.loads((tmp_path / "run" / "manifest.json").read_text())["files"]
    assert not any(n.startswith("/") for n in names), names
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "run", other / "run")
    shutil.rmtree(tmp_path / "run")
    code, out, err = verify(other, capsys, s)
    assert code == 0 and "gate: PASS" in out and "verified:" in err, out + err


def test_a_change_after_verification_is_not_what_is_judged(tmp_path, monkeypatch, capsys):
    """`suite gate --verify` judges the bytes it verified: a samples file rewritten the moment verification ends
    (a path that changes between the two) does not reach the verdict."""
    s = signed(tmp_path, monkeypatch)
    (run := tmp_path / "run" / "summary.json").write_text(json.dumps(s))
    samples = tmp_path / "run" / f"samples_fp8_{TASK}.jsonl"
    real = manifest.verify

    def verify_then_swap(*a, **kw):
        count = real(*a, **kw)
        samples.write_text(samples.read_text().replace('"acc": 1.0', '"acc": 0.0'))  # forged after the check
        return count

    monkeypatch.setattr(manifest, "verify", verify_then_swap)
    from suite import cli

    code = cli.main(["gate", str(run.parent), "--no-record", "--verify"])
    out, err = capsys.readouterr()
    assert code == 0 and "gate: PASS" in out and "verified:" in err, out + err
    code = cli.main(["gate", str(run.parent), "--no-record"])  # the forged folder itself is refused
    out, err = capsys.readouterr()
    assert code == 2 and "gate: PASS" not in out, out + err


def test_summarize_never_signs_and_checks_a_signed_folder(tmp_path, monkeypatch):
    """Only the runner signs: rebuilding a signed folder's summary leaves manifest.json as the run signed it, and a
    stage record edited after signing is refused before anything is rebuilt (no re-signing of forged records)."""
    from suite.runtime.errors import SuiteError

    s = signed(tmp_path, monkeypatch)
    run = tmp_path / "run"
    before = (run / "manifest.json").read_bytes()
    assert manifest.check_records(run) > 0
    staged = run / "variants" / "fp8" / "evaluate.result.json"
    staged.write_text(staged.read_text().replace('"wall_s": 1.0', '"wall_s": 2.0'))
    with pytest.raises(SuiteError) as refused:
        manifest.check_records(run)
    assert str(staged) in str(refused.value) and "changed since the run was signed" in str(refused.value)
    from suite.orchestrate import summarize

    with pytest.raises(SuiteError):
        summarize.rebuild(run)
    assert (run / "manifest.json").read_bytes() == before
    assert s["recipe_sha256"]
