"""Found by the adversarial review: the shared store (``SUITE_STORE`` / ``store:``, a CI cache or a team folder) is a
trust root the threat model (docs/06, docs/07) does not name. ``Store.lookup`` checks only that an entry records the key
of its folder; an entry rewritten by anyone who can write the store (its samples, their sha256 in its result and its
scores, together) is filed into the next run folder as that job's result, stamped with the job and signed by the
runner's manifest, so `suite gate --verify` judges the forged baseline as genuine. (vLLM's compile caches beside it
hold generated Python that later engine starts import: the same writer runs code in every GPU stage; not tested here,
no compiled engine on CPU.)"""

from __future__ import annotations

import hashlib
import json

import pytest

from suite.orchestrate.store import Store
from suite.outputs import manifest
from suite.records.evaluate import EvaluateResult, TaskScore

T1 = "suite_gsm8k"
KEY = "0123456789abcdef"


def stored_baseline(tmp_path) -> Store:
    """A baseline evaluation (right on 200 of 300 items) put into a store, as a run's evaluate stage leaves it."""
    made = tmp_path / "made"
    made.mkdir()
    f = made / f"samples_{T1}.jsonl"
    f.write_text("".join(json.dumps({"task": T1, "doc_id": i, "filter": "none", "acc": float(i % 3 != 0)}) + "\n"
                         for i in range(300)))
    ev = EvaluateResult(scores=[TaskScore(task=T1, metric="acc,none", value=200 / 300, n=300)], results_file="r.json",
                        samples_files={T1: str(f)}, samples_sha256={T1: hashlib.sha256(f.read_bytes()).hexdigest()},
                        wall_s=1, engine_load_s=1)
    store = Store(tmp_path / "store" / "eval-cache")
    store.put("evaluate", KEY, ev)
    return store


def forge(store: Store) -> None:
    """The entry rewritten consistently: the baseline now wrong on every item, its hash and score to match."""
    entry = store.root / KEY
    f = entry / f"samples_{T1}.jsonl"
    f.write_text("".join(json.dumps({"task": T1, "doc_id": i, "filter": "none", "acc": 0.0}) + "\n"
                         for i in range(300)))
    res = entry / "evaluate.result.json"
    data = json.loads(res.read_text())
    data["samples_sha256"][T1] = hashlib.sha256(f.read_bytes()).hexdigest()
    data["scores"][0]["value"] = 0.0
    res.write_text(json.dumps(data))


def test_an_honest_entry_is_found(tmp_path):
    assert Store(stored_baseline(tmp_path).root).lookup("evaluate", KEY) is not None


def test_a_store_entry_rewritten_after_it_was_stored_is_not_used_when_ci_signs(tmp_path, monkeypatch):
    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    store = stored_baseline(tmp_path)
    forge(store)
    hit = Store(store.root).lookup("evaluate", KEY)
    # expected: a miss (the job runs again) or a refusal naming the entry, not the forged scores
    assert hit is None or hit.scores[0].value != 0.0


# The rule as it is kept (orchestrate/store_seal.py): with the key set, an entry is reused only when its seal verifies;
# one that does not is a miss with one line, and the job's new result replaces it; without the key nothing is checked.
def test_an_honest_sealed_entry_is_reused_when_ci_signs(tmp_path, monkeypatch):
    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    store = stored_baseline(tmp_path)
    assert (store.root / KEY / "seal.json").is_file()
    hit = Store(store.root).lookup("evaluate", KEY)
    assert hit is not None and hit.scores[0].value == 200 / 300 and hit.cache_hit


@pytest.mark.parametrize("case", ["stored without the key", "sealed with another key", "a file added",
                                  "the seal removed"])
def test_an_entry_whose_seal_does_not_verify_is_a_miss_with_one_line(tmp_path, monkeypatch, caplog, case):
    if case != "stored without the key":
        monkeypatch.setenv(manifest.KEY_ENV, "other-key" if case == "sealed with another key" else "k" * 32)
    store = stored_baseline(tmp_path)
    if case == "a file added":
        (store.root / KEY / "extra.jsonl").write_text("{}\n")
    if case == "the seal removed":
        (store.root / KEY / "seal.json").unlink()
    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    assert Store(store.root).lookup("evaluate", KEY) is None
    said = [r.getMessage() for r in caplog.records if "not reused" in r.getMessage()]
    assert len(said) == 1 and str(store.root / KEY) in said[0], said
    assert ("no seal" if case in ("stored without the key", "the seal removed") else "does not match") in said[0]


def test_the_jobs_new_result_replaces_a_refused_entry(tmp_path, monkeypatch):
    store = stored_baseline(tmp_path)  # without the key: no seal
    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    assert Store(store.root).lookup("evaluate", KEY) is None
    (tmp_path / "again").mkdir()
    fresh = stored_baseline(tmp_path / "again")  # the job ran again: its result put under the same key
    Store(store.root).put("evaluate", KEY, fresh.lookup("evaluate", KEY))
    assert Store(store.root).lookup("evaluate", KEY) is not None


def test_without_the_key_the_store_is_trusted_like_the_output_folder(tmp_path):
    store = stored_baseline(tmp_path)
    forge(store)
    assert Store(store.root).lookup("evaluate", KEY).scores[0].value == 0.0  # docs/07 says so


def test_an_entry_of_more_files_than_are_hashed_is_never_vouched_for(tmp_path, monkeypatch):
    """Over MAX_FILES the seal is over a body that names no file: a forged entry must not be reused on it."""
    from suite.orchestrate import store_seal

    monkeypatch.setenv(manifest.KEY_ENV, "k" * 32)
    monkeypatch.setattr(store_seal, "MAX_FILES", 1)
    store = stored_baseline(tmp_path)
    forge(store)
    assert Store(store.root).lookup("evaluate", KEY) is None
