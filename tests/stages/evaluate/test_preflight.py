"""The reproducibility pre-flight: a variant whose tokenizer files would change the prompts is flagged."""

from __future__ import annotations

import json
import shutil

from conftest import DEMO_MODEL, needs_demo_model
from suite.stages.evaluate import preflight
from suite.records.summary import VariantSummary
from suite.stages.evaluate.preflight import preflight_tokenizers

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@needs_demo_model()
def test_preflight_flags_template_and_bos_changes(tmp_path):
    base, same, changed = (tmp_path / n for n in ("base", "same", "changed"))
    for d in (base, same, changed):
        d.mkdir()
        for f in TOKENIZER_FILES:
            shutil.copy(DEMO_MODEL / f, d / f)
    (changed / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    cfg = json.loads((changed / "tokenizer_config.json").read_text())
    cfg["bos_token"] = "<|endoftext|>"
    (changed / "tokenizer_config.json").write_text(json.dumps(cfg))

    facts = preflight.tokenizer_facts(str(base))
    assert facts["found"] and facts["bos_token"] == "<|im_start|>" and facts["encodes_bos"] is False
    assert len(facts["chat_template_sha256"]) == 16 and facts["probe_ids"]

    variants = [VariantSummary(name="bf16", is_baseline=True, model_path=str(base)),
                VariantSummary(name="fp8-same", is_baseline=False, model_path=str(same)),
                VariantSummary(name="fp8-changed", is_baseline=False, model_path=str(changed))]
    warnings = preflight_tokenizers(variants)
    assert all(w.startswith("fp8-changed: ") for w in warnings) and len(warnings) == 2
    assert any("chat template" in w for w in warnings) and any("BOS token" in w for w in warnings)
    assert variants[1].tokenizer == variants[0].tokenizer
    assert preflight.tokenizer_facts(str(tmp_path / "nowhere")) == {"found": False}
