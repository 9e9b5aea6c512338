"""The compile store: one folder per engine configuration's key, the stage's cache variables pointed at it, cold then
warm."""

from __future__ import annotations

import json
from pathlib import Path

from suite.records.evaluate import EngineConfig
from suite.runtime.engine import compilecache
from suite.runtime.engine.compilecache import (CACHE_VARS, JIT_VARS, STORE_ENV, compile_key, engine_key, jit_key,
                                               mark_complete, use)

VERSIONS = {"vllm": "0.26.0", "torch": "2.11.0"}


def engine(tmp_path, **changes) -> EngineConfig:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    if not (model / "config.json").exists():
        (model / "config.json").write_text(json.dumps({"hidden_size": 4096}))
    fields = {"model": str(model), "dtype": "bfloat16", "max_model_len": 4096,
              "engine_args": {"gpu_memory_utilization": 0.9}} | changes
    return EngineConfig(**fields)


def test_the_key_follows_what_decides_the_compiled_code(tmp_path):
    base = engine(tmp_path)
    key = compile_key(base, VERSIONS, "NVIDIA H100 80GB HBM3")
    assert key == compile_key(base, VERSIONS, "NVIDIA H100 80GB HBM3")
    # BF16 and FP8 (online or KV), another GPU, vLLM or torch, length or batch switch: folders of their own
    assert key != compile_key(engine(tmp_path, engine_args={"gpu_memory_utilization": 0.9, "quantization": "fp8"}),
                              VERSIONS, "NVIDIA H100 80GB HBM3")
    assert key != compile_key(engine(tmp_path, kv_cache_dtype="fp8"), VERSIONS, "NVIDIA H100 80GB HBM3")
    assert key != compile_key(base, VERSIONS, "NVIDIA H200")
    assert key != compile_key(base, {**VERSIONS, "vllm": "0.26.1"}, "NVIDIA H100 80GB HBM3")
    assert key != compile_key(base, {**VERSIONS, "torch": "2.11.1"}, "NVIDIA H100 80GB HBM3")
    assert key != compile_key(engine(tmp_path, max_model_len=8192), VERSIONS, "NVIDIA H100 80GB HBM3")
    assert key != compile_key(engine(tmp_path, batch_invariant=True), VERSIONS, "NVIDIA H100 80GB HBM3")
    # the model's shape is its config.json: another config, another key
    (tmp_path / "model" / "config.json").write_text(json.dumps({"hidden_size": 8192}))
    assert key != compile_key(base, VERSIONS, "NVIDIA H100 80GB HBM3")
    (tmp_path / "model" / "config.json").write_text(json.dumps({"hidden_size": 4096}))
    # what only sizes memory or seeds sampling is no part of it (one compiled engine, another KV cache size)
    assert key == compile_key(engine(tmp_path, engine_args={"gpu_memory_utilization": 0.5, "seed": 3}), VERSIONS,
                              "NVIDIA H100 80GB HBM3")


def test_the_engine_key_covers_the_whole_configuration(tmp_path):
    base = engine(tmp_path)
    assert engine_key(base) == engine_key(engine(tmp_path))
    assert engine_key(base) != engine_key(engine(tmp_path, engine_args={"gpu_memory_utilization": 0.5}))
    assert engine_key(base) != engine_key(base, {"max_num_seqs": 64})


def test_use_points_the_caches_at_the_keys_folder_cold_then_warm(tmp_path, monkeypatch):
    monkeypatch.setattr(compilecache, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    env = {STORE_ENV: str(tmp_path / "store")}
    slot = use(engine(tmp_path), VERSIONS, env)
    assert slot.state == "cold" and slot.folder == tmp_path / "store" / "compile-cache" / slot.key
    for var, sub in CACHE_VARS.items():
        assert env[var] == str(slot.folder / sub) and (slot.folder / sub).is_dir()
    assert set(JIT_VARS) <= set(env)
    mark_complete(slot)
    again = use(engine(tmp_path), VERSIONS, env)
    assert again == compilecache.CompileSlot(slot.key, slot.folder, "warm", slot.jit)
    # FP8 gets a folder of its own, cold, beside BF16's warm one (neither evicts the other)
    fp8 = use(engine(tmp_path, engine_args={"quantization": "fp8"}), VERSIONS, env)
    assert fp8.state == "cold" and fp8.key != slot.key and (slot.folder / compilecache.COMPLETE).is_file()
    assert compilecache.store_bytes(tmp_path / "store") > 0


def test_the_jit_caches_are_one_folder_for_every_configuration_of_a_build(tmp_path, monkeypatch):
    monkeypatch.setattr(compilecache, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    bf16_env, fp8_env = {STORE_ENV: str(tmp_path / "store")}, {STORE_ENV: str(tmp_path / "store")}
    bf16 = use(engine(tmp_path), VERSIONS, bf16_env)
    fp8 = use(engine(tmp_path, kv_cache_dtype="fp8"), VERSIONS, fp8_env)
    jit = tmp_path / "store" / "compile-cache" / f"jit-{jit_key(VERSIONS, 'NVIDIA H100 80GB HBM3')}"
    for var, sub in JIT_VARS.items():  # FlashInfer's, Triton's, Inductor's kernels: built once, whichever engine needs them
        assert bf16_env[var] == fp8_env[var] == str(jit / sub) and (jit / sub).is_dir()
    for var in CACHE_VARS:  # the compiled graphs stay the configuration's own
        assert bf16_env[var].startswith(str(bf16.folder)) and fp8_env[var].startswith(str(fp8.folder))
    assert not set(CACHE_VARS) & set(JIT_VARS)
    assert set(JIT_VARS) == {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE"}
    # another vLLM, torch or GPU: another JIT folder (kernels built by another build are never loaded)
    assert len({jit_key(VERSIONS, "NVIDIA H100 80GB HBM3"), jit_key(VERSIONS, "NVIDIA H200"),
                jit_key({**VERSIONS, "vllm": "0.26.1"}, "NVIDIA H100 80GB HBM3"),
                jit_key({**VERSIONS, "torch": "2.11.1"}, "NVIDIA H100 80GB HBM3")}) == 4


def test_without_a_store_nothing_changes(tmp_path):
    env = {"PATH": "/bin"}
    assert use(engine(tmp_path), VERSIONS, env) is None and env == {"PATH": "/bin"}
    mark_complete(None)  # nothing to mark
    assert compilecache.store_bytes(tmp_path / "none") == 0


def test_vllms_model_class_facts_are_shared_between_configurations(tmp_path, monkeypatch):
    """vLLM inspects a model class in a subprocess that imports vLLM again unless $VLLM_CACHE_ROOT/modelinfos holds
    the class's facts: the first configuration's are copied to the JIT folder when its engine is up, and into the
    next configuration's folder before its start; an oversized file or a link is not copied, nor one already there."""
    monkeypatch.setattr(compilecache, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    env = {STORE_ENV: str(tmp_path / "store")}
    bf16 = use(engine(tmp_path), VERSIONS, env)
    written = Path(env["VLLM_CACHE_ROOT"]) / "modelinfos"  # where vLLM writes them: the configuration's own
    written.mkdir(parents=True, exist_ok=True)
    facts = '{"hash": "ab12", "modelinfo": {"is_text_generation_model": true}}'
    (written / "vllm-model_executor-models-llama-LlamaForCausalLM.json").write_text(facts)
    (written / "huge.json").write_bytes(b" " * (compilecache.MAX_MODELINFO_BYTES + 1))
    (written / "elsewhere.json").symlink_to(tmp_path / "model" / "config.json")
    mark_complete(bf16)
    shared = bf16.jit / "modelinfos"
    assert sorted(p.name for p in shared.iterdir()) == ["vllm-model_executor-models-llama-LlamaForCausalLM.json"]
    fp8 = use(engine(tmp_path, kv_cache_dtype="fp8"), VERSIONS, env)
    seeded = fp8.folder / "vllm" / "modelinfos" / "vllm-model_executor-models-llama-LlamaForCausalLM.json"
    assert fp8.state == "cold" and seeded.read_text() == facts and env["VLLM_CACHE_ROOT"] == str(fp8.folder / "vllm")
    # what a configuration already has is its own (vLLM rewrites a stale one after checking its module hash)
    seeded.write_text('{"hash": "cd34"}')
    use(engine(tmp_path, kv_cache_dtype="fp8"), VERSIONS, env)
    assert seeded.read_text() == '{"hash": "cd34"}'


def test_the_modelinfo_copy_never_writes_through_a_link_nor_fails_a_start(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(compilecache, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    env = {STORE_ENV: str(tmp_path / "store")}
    slot = use(engine(tmp_path), VERSIONS, env)
    shared = slot.jit / "modelinfos"
    shared.mkdir()
    (shared / "vllm-model_executor-models-llama-LlamaForCausalLM.json").write_text('{"hash": "ab12"}')
    victim = tmp_path / "victim.json"
    victim.write_text("mine")
    own = slot.folder / "vllm" / "modelinfos"
    own.mkdir()
    (own / "vllm-model_executor-models-llama-LlamaForCausalLM.json").symlink_to(victim)  # a planted link
    use(engine(tmp_path), VERSIONS, env)
    assert victim.read_text() == "mine"
    # the configuration's whole modelinfos folder a link: nothing is written into where it leads
    (own / "vllm-model_executor-models-llama-LlamaForCausalLM.json").unlink()
    own.rmdir()
    own.symlink_to(tmp_path)
    use(engine(tmp_path), VERSIONS, env)
    assert not (tmp_path / "vllm-model_executor-models-llama-LlamaForCausalLM.json").exists()
    # a copy that cannot be made is one warning, not a failed start
    own.unlink()
    own.write_text("a file where a folder should be")
    with caplog.at_level("WARNING"):
        assert use(engine(tmp_path), VERSIONS, env).state == "cold"
    assert "not shared" in caplog.text
