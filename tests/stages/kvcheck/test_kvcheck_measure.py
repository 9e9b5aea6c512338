"""suite.stages.kvcheck.measure (and suite.runtime.kvbias): the FP8 E4M3 KV scale check on tensors with known clipping/underflow, the bias
pre-flight on a constructed safetensors file with one outlier bias, and the attention hook on a tiny
random Qwen2 model (K seen after bias and RoPE; KL 0 when every layer is kept in BF16)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402

from suite.records.kvcheck import FP8_E4M3_MAX_REL_ROUNDING  # noqa: E402
from suite.runtime import kvbias  # noqa: E402
from suite.stages.kvcheck import measure as kvcheck  # noqa: E402


def test_qdq_saturates_and_keeps_representable_values():
    x = torch.tensor([0.0, 1.0, -2.5, 448.0, 1000.0, -1000.0])
    out = kvcheck.fp8_e4m3_qdq(x, 1.0)
    assert out.tolist() == [0.0, 1.0, -2.5, 448.0, 448.0, -448.0]
    # with a scale: 1000 / 4 = 250 is within range, 240 and 256 are E4M3 neighbours (ulp 16 there)
    assert kvcheck.fp8_e4m3_qdq(torch.tensor([1000.0]), 4.0).item() in (960.0, 1024.0)


def test_clip_stats_counts_known_clipping_and_underflow():
    base = torch.linspace(1.0, 2.0, 990)                 # normal range at scale 1
    big = torch.full((10,), 1000.0)                      # clipped at scale 1 (> 464)
    edge = torch.tensor([450.0, 460.0])                  # round to 448: not clipped
    tiny = torch.full((8,), 1e-3)                        # < 2**-6 = 0.0156: subnormal
    x = torch.cat([base, big, edge, tiny])
    s = kvcheck.clip_stats(x, 1.0)
    assert s.clipped_frac == pytest.approx(10 / x.numel())
    assert s.underflow_frac == pytest.approx(8 / x.numel())
    assert s.rel_err > 0.5                               # 1000 -> 448 dominates the error
    # a scale from the tensor's own absmax clips nothing, and the error is E4M3 rounding only
    s2 = kvcheck.clip_stats(x, x.abs().max() / 448)
    assert s2.clipped_frac == 0.0
    assert s2.rel_err < FP8_E4M3_MAX_REL_ROUNDING


def test_rounding_error_of_a_well_scaled_tensor_is_below_the_e4m3_bound():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g)
    s = kvcheck.clip_stats(x, x.abs().max() / 448)
    assert 0.01 < s.rel_err < FP8_E4M3_MAX_REL_ROUNDING
    # E4M3 spans 448 / 2**-6 = 28,672x of normal range: a scale 1e5x too large puts every value into
    # subnormals (or 0), and the error shows it
    s_big = kvcheck.clip_stats(x, 1e5 * x.abs().max() / 448)
    assert s_big.underflow_frac > 0.99 and s_big.rel_err > 4 * s.rel_err


def test_option_scales():
    x = torch.zeros(1, 2, 3, 4)
    x[0, 0] = 10.0
    x[0, 1] = 1.0
    ph = kvcheck.option_scale("per-head", "k", x, 0, {}, {})
    assert ph.shape == (1, 2, 1, 1)
    assert ph.flatten().tolist() == pytest.approx([10 / 448, 1 / 448])
    assert float(kvcheck.option_scale("dynamic", "k", x, 0, {}, {})) == pytest.approx(10 / 448)
    assert float(kvcheck.option_scale("calibrated", "k", x, 3, {3: {"k": 0.5, "v": 0.1}}, {})) == 0.5
    assert float(kvcheck.option_scale("calibrated", "q", x, 3, {3: {"k": 0.5, "v": 0.1}}, {})) == 1.0
    assert float(kvcheck.option_scale("unit", "v", x, 3, {}, {})) == 1.0
    with pytest.raises(ValueError, match="unknown KV scale option"):
        kvcheck.option_scale("bogus", "k", x, 0, {}, {})


def _row(layer, err, clipped=0.0):
    return kvcheck.LayerRow(layer, "calibrated", "k", 1.0, 1.0, clipped, 0.0, err)


def test_flag_rows_marks_clipping_and_outlier_error():
    rows = [_row(i, 0.027) for i in range(6)] + [_row(6, 0.03, clipped=1e-3), _row(7, 0.09)]
    kvcheck.flag_rows(rows)
    assert [r.layer for r in rows if r.flags] == [6, 7]
    assert any("clips" in f for f in rows[6].flags)
    assert any("median" in f for f in rows[7].flags) and any("> 0.0625" in f for f in rows[7].flags)


def _fake_checkpoint(tmp_path, k_norms, v_norm=1.0, extra=None):
    tensors = {}
    for i, n in enumerate(k_norms):
        tensors[f"model.layers.{i}.self_attn.k_proj.bias"] = torch.full((16,), n / 4.0)  # ||.|| = n
        tensors[f"model.layers.{i}.self_attn.v_proj.bias"] = torch.full((16,), v_norm / 4.0)
        tensors[f"model.layers.{i}.self_attn.k_proj.weight"] = torch.zeros(16, 8)
    tensors.update(extra or {})
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path


def test_bias_preflight_names_the_outlier_layer(tmp_path):
    ckpt = _fake_checkpoint(tmp_path, [10, 11, 9, 12, 200, 10, 10.5, 9.5])
    norms = kvbias.bias_norms(ckpt)
    assert norms["k_proj"][4] == pytest.approx(200.0)
    found = kvbias.kv_bias_preflight(ckpt)
    assert [(f.layer, f.proj) for f in found] == [(4, "k_proj")]
    assert found[0].ratio == pytest.approx(200 / 10.25)
    assert kvbias.kv_bias_preflight(ckpt, factor=30) == []


def test_bias_preflight_without_biases_or_files(tmp_path):
    save_file({"model.layers.0.self_attn.k_proj.weight": torch.zeros(4, 4)}, str(tmp_path / "model.safetensors"))
    assert kvbias.kv_bias_preflight(tmp_path) == []
    with pytest.raises(FileNotFoundError):
        kvbias.kv_bias_preflight(tmp_path / "missing")


def test_bias_norms_read_bf16_and_f16_biases_as_torch_sees_them(tmp_path):
    """safe_open(framework="numpy") with ml_dtypes' bfloat16: the norms of BF16 and F16 biases are those torch
    computes from the same tensors (numpy has no bfloat16 of its own)."""
    g = torch.Generator().manual_seed(0)
    k = [torch.randn(64, generator=g).to(torch.bfloat16) * (3 if i == 2 else 1) for i in range(4)]
    v = [torch.randn(64, generator=g).to(torch.float16) for _ in range(4)]
    save_file({**{f"model.layers.{i}.self_attn.k_proj.bias": t for i, t in enumerate(k)},
               **{f"model.layers.{i}.self_attn.v_proj.bias": t for i, t in enumerate(v)}}, str(tmp_path / "m.safetensors"))
    norms = kvbias.bias_norms(tmp_path)
    assert norms["k_proj"] == {i: pytest.approx(t.double().norm().item(), rel=1e-12) for i, t in enumerate(k)}
    assert norms["v_proj"] == {i: pytest.approx(t.double().norm().item(), rel=1e-12) for i, t in enumerate(v)}


def test_a_file_safetensors_refuses_is_reported_not_raised(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json......}")
    with pytest.raises(ValueError, match="model.safetensors"):
        kvbias.bias_norms(tmp_path)
    (warning,) = kvbias.preflight_warnings("v", tmp_path, calibrated=False)
    assert warning.startswith(f"v: KV pre-flight could not read {tmp_path}: model.safetensors: ")


def test_read_kv_scales(tmp_path):
    ckpt = _fake_checkpoint(tmp_path, [1, 1], extra={
        "model.layers.0.self_attn.k_scale": torch.tensor(0.25),
        "model.layers.0.self_attn.v_scale": torch.tensor([0.01]),
        "model.layers.1.self_attn.k_scale": torch.tensor(0.5), "model.layers.1.self_attn.v_scale": torch.tensor(0.02)})
    assert kvcheck.read_kv_scales(ckpt) == {0: {"k": 0.25, "v": pytest.approx(0.01)},
                                            1: {"k": 0.5, "v": pytest.approx(0.02)}}


# ----- the attention hook on a tiny random Qwen2 model -----

def _tiny_qwen2(path):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(["<unk>"] + list("abcdefghijklmnopqrstuvwxyz .,0123456789"))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    cfg = transformers.Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # small biases everywhere, a Qwen2-like outlier k_proj bias in layer 1
        for layer in model.model.layers:
            layer.self_attn.k_proj.bias.normal_(0.0, 0.5)
            layer.self_attn.v_proj.bias.normal_(0.0, 0.5)
        model.model.layers[1].self_attn.k_proj.bias.fill_(0.0)
        model.model.layers[1].self_attn.k_proj.bias[:4] = 60.0
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


TEXTS = ["the quick brown fox jumps over the lazy dog, 12 times.", "pack my box with five dozen liquor jugs."]


def test_hook_sees_post_rope_k_and_report_flags_a_too_small_scale(tmp_path):
    model_dir = _tiny_qwen2(tmp_path / "tiny")
    assert [(f.layer, f.proj) for f in kvbias.kv_bias_preflight(model_dir)] == [(1, "k_proj")]
    # calibrated scales 10x below the data's range in layer 1's K
    rows = kvcheck.kv_scale_report(model_dir, TEXTS, options=["unit", "dynamic", "per-head"])
    k1 = next(r for r in rows if (r.layer, r.option, r.tensor) == (1, "dynamic", "k"))
    assert k1.absmax > 60.0  # the bias shows up in K: hooked after k_proj (+bias) and RoPE
    assert all(r.clipped_frac == 0.0 for r in rows if r.option in ("dynamic", "per-head"))
    small = {f"model.layers.{i}.self_attn.{t}_scale": torch.tensor(k1.absmax / 448 / 10) for i in range(3)
             for t in "kv"}
    save_file(small, str(tmp_path / "tiny" / "scales.safetensors"))
    rows = kvcheck.kv_scale_report(model_dir, TEXTS, options=["calibrated", "dynamic"])
    bad = next(r for r in rows if (r.layer, r.option, r.tensor) == (1, "calibrated", "k"))
    assert bad.clipped_frac > 1e-4 and any("clips" in f for f in bad.flags)
    assert "| 1 | calibrated | k |" in kvcheck.format_rows(rows)
    assert {r.tensor for r in rows} == {"q", "k", "v", "attn"}
    with pytest.raises(ValueError, match="unknown KV scale option"):
        kvcheck.kv_scale_report(model_dir, TEXTS, options=["fp4"])


def test_kl_is_zero_with_every_layer_skipped_and_grows_with_clipping(tmp_path):
    model_dir = _tiny_qwen2(tmp_path / "tiny")
    model = kvcheck.load_hooked_model(model_dir)
    ref = kvcheck.bf16_reference(model, model_dir, TEXTS)
    none = kvcheck.kv_fake_quant_kl(model_dir, TEXTS, "dynamic", skip_layers=[0, 1, 2], model=model, reference=ref)
    assert none.kl == pytest.approx(0.0, abs=1e-9) and none.top1_agree == 1.0 and none.ppl == none.ppl_bf16
    dyn = kvcheck.kv_fake_quant_kl(model_dir, TEXTS, "dynamic", model=model, reference=ref, quantize_q=True)
    assert dyn.kl >= 0.0 and dyn.tokens == none.tokens > 40
    save_file({f"model.layers.{i}.self_attn.{t}_scale": torch.tensor(1e-3) for i in range(3) for t in "kv"},
              str(tmp_path / "tiny" / "scales.safetensors"))
    clipped = kvcheck.kv_fake_quant_kl(model_dir, TEXTS, "calibrated", model=model, reference=ref)
    assert clipped.kl > 10 * dyn.kl
    json.dumps(clipped.__dict__)  # serialisable for the run output


def test_attention_error_is_flagged_against_the_ideal_scale_of_the_same_layer():
    def attn(layer, option, err):
        return kvcheck.LayerRow(layer, option, "attn", 1.0, 0.0, 0.0, 0.0, err)
    # layer 0's attention is sensitive under every option (0.37); only a 1.6x rise over 'dynamic' is flagged
    rows = [attn(0, "dynamic", 0.37), attn(0, "unit", 0.39), attn(0, "calibrated", 0.61),
            attn(1, "dynamic", 0.05), attn(1, "calibrated", 0.06)]
    kvcheck.flag_rows(rows)
    assert [(r.layer, r.option) for r in rows if r.flags] == [(0, "calibrated")]


def test_the_run_warns_about_fp8_kv_on_a_model_with_outlier_biases(tmp_path):
    """suite run's pre-flight (before any evaluation): a variant with an FP8 KV cache on a model whose
    k_proj bias stands out is named, with calibrated scales called the riskiest choice; BF16 KV and a
    model without such biases say nothing; nothing imports torch for it."""
    import subprocess
    import sys

    from suite.records.summary import VariantSummary
    from suite.runtime.kvbias import preflight_kv

    (tmp_path / "outlier").mkdir()
    (tmp_path / "plain").mkdir()
    ckpt = _fake_checkpoint(tmp_path / "outlier", [10, 11, 9, 12, 200, 10, 10.5, 9.5])
    plain = _fake_checkpoint(tmp_path / "plain", [10, 11, 9, 12])
    vs = [VariantSummary(name="bf16", is_baseline=True, model_path=str(ckpt)),
          VariantSummary(name="fp8kv-cal", is_baseline=False, model_path=str(ckpt), kv_cache="fp8", kv_cache_dtype="fp8"),
          VariantSummary(name="fp8kv-unit", is_baseline=False, model_path=str(ckpt), kv_cache_dtype="fp8"),
          VariantSummary(name="other", is_baseline=False, model_path=str(plain), kv_cache_dtype="fp8")]
    warnings = preflight_kv(vs)
    assert len(warnings) == 2
    assert warnings[0].startswith("fp8kv-cal: FP8 KV cache") and "layer(s) 4 (k_proj bias 20x" in warnings[0]
    assert "calibrated per-tensor k/v scales are the riskiest" in warnings[0]
    assert warnings[1].startswith("fp8kv-unit:") and "calibrated" not in warnings[1]
    probe = ("import sys; from suite.runtime import kvbias; kvbias.preflight_warnings('v', sys.argv[1], True); "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(ckpt)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
