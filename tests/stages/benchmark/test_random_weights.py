"""Throughput-only recipes on random weights (the GPU's Llama-3-8B-shape study, in miniature, on CPU):
the Llama 3 tokenizer converted from its tiktoken file, a config-only model folder, the baseline served
with vLLM's dummy loader, a variant quantized by llmcompressor from a randomly initialised model."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import ROOT, SHARED_DATA, needs_cpu_fp8_kv, run_cli

TIKTOKEN = SHARED_DATA / "tokenizers" / "llama3" / "tokenizer.model"
pytestmark = pytest.mark.skipif(not TIKTOKEN.is_file(), reason="../shared/data/tokenizers/llama3 missing")


@pytest.fixture(scope="module")
def tiny_llama3(tmp_path_factory):
    from tools import models

    out = models.llama3_shape(TIKTOKEN, tmp_path_factory.mktemp("m") / "llama3-tiny")
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=32)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def test_llama3_tokenizer_from_tiktoken(tiny_llama3):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama3)
    # ids as Meta's reference tokenizer gives them (BOS, 'Hello', ' world', ',', ... digits in threes)
    assert tok("Hello world, this is 2026!")["input_ids"] == [128000, 9906, 1917, 11, 420, 374, 220, 2366, 21, 0]
    assert len(tok) == 128256 and tok.eos_token == "<|eot_id|>"
    chat = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_random_weights_recipe_refuses_accuracy_tasks(tiny_llama3, tmp_path):
    recipe = {"name": "r", "model": {"id": str(tiny_llama3), "weights": "random"}, "baseline": {"name": "bf16"},
              "variants": [{"name": "kv8", "kv_cache_dtype": "fp8"}],
              "eval": {"tasks": [{"name": "suite_gsm8k"}]}, "throughput": {"request_rates": [1]}}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    res = run_cli("validate", str(path))
    assert res.returncode == 2 and "eval.tasks: model.weights is 'random'" in res.stderr


@pytest.mark.integration
@needs_cpu_fp8_kv()  # its kv8 variant
def test_throughput_only_run_on_random_weights(tiny_llama3, tmp_path):
    recipe = {
        "name": "tiny-shape", "model": {"id": str(tiny_llama3), "weights": "random", "max_model_len": 512},
        "baseline": {"name": "bf16", "engine_args": {"enforce_eager": True, "distributed_executor_backend": "uni"}},
        "variants": [{"name": "kv8", "kv_cache_dtype": "fp8",
                      "quantization": {"kv_cache": "fp8", "calibration": "chat-demo", "num_calibration_samples": 8,
                                       "max_seq_length": 128},
                      "engine_args": {"enforce_eager": True, "distributed_executor_backend": "uni"}}],
        "throughput": {"input_len": 64, "output_len": 16, "num_prompts": 8, "request_rates": ["inf"],
                       "repetitions": 1, "warmup_requests": 0},
        "runtime": {"env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                            "HF_HUB_OFFLINE": "1"}},
        "output_dir": str(tmp_path / "runs"),
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    res = run_cli("run", str(path), "--no-track", cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").glob("*-tiny-shape")
    s = json.loads((run_dir / "summary.json").read_text())
    base, kv8 = s["variants"]
    assert not base["errors"] and not kv8["errors"]
    assert "evaluate" not in base["stages"] and "evaluate" not in kv8["stages"]
    assert base["stages"]["benchmark"]["server_command"][base["stages"]["benchmark"]["server_command"].index("--load-format") + 1] == "dummy"
    assert kv8["stages"]["quantize"]["kv_cache_scales"] == 4 and kv8["stages"]["quantize"]["cache_hit"] is False
    prov = json.loads((run_dir.parent / "checkpoints" / kv8["model_path"].split("/")[-1] / "provenance.json").read_text())
    assert prov["config"]["random_weights"] is True
    for v in (base, kv8):
        (p,) = v["stages"]["benchmark"]["points"]
        assert p["ok"] and p["completed"] == 8 and v["metrics"]["tput.output_tok_s"] > 0
    assert kv8["stages"]["benchmark"]["kv_cache_tokens"] == 2 * base["stages"]["benchmark"]["kv_cache_tokens"]
