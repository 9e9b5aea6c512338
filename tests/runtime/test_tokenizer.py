"""suite.runtime.tokenizer.keep: a perplexity evaluation keeps its model's tokenizer.json in the run folder."""

from __future__ import annotations

import hashlib

from suite.runtime import tokenizer


def test_kept_only_for_a_perplexity_and_only_when_the_model_has_one(tmp_path):
    model, out = tmp_path / "model", tmp_path / "out"
    model.mkdir()
    out.mkdir()
    assert tokenizer.keep(str(model), ["word_perplexity,none"], out) == (None, None)  # no tokenizer.json
    (model / "tokenizer.json").write_text('{"version": "1.0"}')
    assert tokenizer.keep(str(model), ["acc,none", "exact_match,strict-match"], out) == (None, None)
    assert not (out / "tokenizer.json").exists()
    kept, sha = tokenizer.keep(str(model), ["acc,none", "word_perplexity,none"], out)
    assert kept == str(out / "tokenizer.json") and (out / "tokenizer.json").read_text() == '{"version": "1.0"}'
    assert sha == hashlib.sha256(b'{"version": "1.0"}').hexdigest()
