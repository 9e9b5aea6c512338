"""The served model (suite.stages.evaluate.served) builds what lm-eval's offline vLLM backend builds.

Compared with lm-eval's own ``VLLM`` methods (lm_eval/models/vllm_causallms.py, called unbound on the state
they read) and with the tokenizer and chat template that backend resolves through vLLM: token ids (BOS
included where the tokenizer adds one: the Llama 3 tokenizer, when ../shared/data has it), generation
settings, the chat-templated prompt. No server is contacted: the refusal of a sampling task comes before
any request.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import DEMO_MODEL, ROOT, SHARED_DATA, needs_demo_model

pytestmark = needs_demo_model()
QWEN = ROOT / "models" / "qwen2.5-coder-0.5b-instruct"
TIKTOKEN = SHARED_DATA / "tokenizers" / "llama3" / "tokenizer.model"
TEXTS = ["Question: Natalia sold clips to 48 of her friends in April.\nAnswer:", " leading space", "é ü 中文 🙂",
         "Question: x\n\nAnswer: 42\n\nQuestion: y\nAnswer:"]


@pytest.fixture(scope="module")
def lmeval_vllm():
    from suite.runtime.vllm_alias import install_vllm_version_alias

    install_vllm_version_alias()
    from lm_eval.models import vllm_causallms

    return vllm_causallms


def _models(tmp_path_factory):
    out = [DEMO_MODEL] + ([QWEN] if (QWEN / "config.json").is_file() else [])
    if TIKTOKEN.is_file():
        from tools import models

        out.append(models.llama3_shape(TIKTOKEN, tmp_path_factory.mktemp("m") / "llama3-tiny"))
    return out


def _served(model):
    from suite.stages.evaluate.served import ServedCompletions

    return ServedCompletions("http://127.0.0.1:9/v1/completions", str(model), 2048, 1234, 4, max_gen_toks=96)


def test_token_ids_are_the_offline_backends(lmeval_vllm, tmp_path_factory):
    for model in _models(tmp_path_factory):
        lm = _served(model)
        offline_tok = lmeval_vllm.get_tokenizer(str(model))  # what VLLM.__init__ loads
        bos = offline_tok.bos_token_id if offline_tok.bos_token_id is not None else offline_tok.eos_token_id
        state = SimpleNamespace(tokenizer=offline_tok, prefix_token_id=bos, add_bos_token=None)
        texts = TEXTS + [offline_tok.decode(bos) + "text that starts with BOS"]
        assert lm.prefix_token_id == bos
        assert lm.tok_encode(texts) == lmeval_vllm.VLLM.tok_encode(state, texts), model
        assert lm.tok_encode(texts[0]) == lmeval_vllm.VLLM.tok_encode(state, texts[0])
        if "llama3" in str(model):  # a tokenizer that adds BOS: lm-eval's API model would not (add_bos_token=False)
            assert lm.tok_encode(texts[0])[0] == offline_tok.bos_token_id


def test_generation_settings_are_the_offline_backends(lmeval_vllm):
    from suite.stages.evaluate.served import NEUTRAL_SAMPLING, offline_gen_kwargs

    lm = _served(DEMO_MODEL)
    for gen in ({"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0},
                {"until": "\n\n", "max_gen_toks": 32},
                {"until": ["Q:"], "do_sample": False, "temperature": 0.7, "max_new_tokens": 17},
                {}):
        ours = offline_gen_kwargs(gen, lm.eos_text, lm._max_gen_toks)
        assert ours == lmeval_vllm.VLLM.modify_gen_kwargs(gen, eos=lm.eos_text, default_max_gen_toks=96)
        payload = lm._create_payload([[1, 2]], generate=True, gen_kwargs=gen, seed=1234)
        sampling, until, max_gen_toks = ours
        assert payload["stop"] == until[:4] and payload["max_tokens"] == max_gen_toks
        # as offline: no temperature in the task's kwargs (and do_sample not false) is SamplingParams' 1.0
        assert payload["temperature"] == sampling.get("temperature", 1.0) == (1.0 if "do_sample" not in gen else 0.0)
        assert payload["skip_special_tokens"] is False and payload["spaces_between_special_tokens"] is False
        assert all(payload[k] == v for k, v in NEUTRAL_SAMPLING.items())  # not the model's generation_config.json
    ll = lm._create_payload([[1, 2, 3]], generate=False, seed=1234)
    assert ll["echo"] is True and ll["logprobs"] == 1 and ll["max_tokens"] == 1 and ll["repetition_penalty"] == 1.0
    assert lm.max_length == 2047  # the offline backend's max_model_len - 1 for loglikelihood contexts


def test_a_task_with_more_stop_sequences_than_a_server_takes_is_cut_at_every_one(lmeval_vllm, monkeypatch):
    """HumanEval's 5 stop sequences and the EOS text: a server takes 4 (vLLM 0.32 answers 400 to more); the text it
    returns is cut at all 6 afterwards, as the offline engine's is."""
    from lm_eval.models.api_models import TemplateAPI

    lm = _served(DEMO_MODEL)
    until = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]
    payload = lm._create_payload([[1, 2]], generate=True, gen_kwargs={"until": until, "do_sample": False}, seed=1)
    assert payload["stop"] == until[:4]
    # the server did not stop at "\nprint" (not sent): the text comes back longer and is cut there
    monkeypatch.setattr(TemplateAPI, "generate_until", lambda self, reqs, disable_tqdm=False:
                        ["    return x\nprint(f(1))\n"])
    req = SimpleNamespace(args=("def f(x):\n", {"until": until, "do_sample": False}), task_name="humaneval")
    assert lm.generate_until([req]) == ["    return x"]


def test_the_chat_templated_prompt_is_the_offline_backends(lmeval_vllm):
    from vllm.engine.arg_utils import EngineArgs

    model = QWEN if (QWEN / "config.json").is_file() else DEMO_MODEL
    lm = _served(model)
    offline_tok = lmeval_vllm.get_tokenizer(str(model))
    template = lmeval_vllm.resolve_hf_chat_template(
        tokenizer=offline_tok, chat_template=None, tools=None,
        model_config=EngineArgs(model=str(model), max_model_len=2048).create_model_config())
    state = SimpleNamespace(tokenizer=offline_tok, hf_chat_template=template, enable_thinking=None, chat_template_args={})
    history = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2 + 2?"}]
    for gen_prompt in (True, False):
        chat = history if gen_prompt else history + [{"role": "assistant", "content": "It is"}]
        assert lm.apply_chat_template(chat, gen_prompt) == lmeval_vllm.VLLM.apply_chat_template(state, chat, gen_prompt)


def test_a_sampling_task_is_refused_before_any_request():
    from lm_eval.api.instance import Instance

    from suite.stages.evaluate.served import ServedRefusal

    lm = _served(DEMO_MODEL)
    for gen, temperature in (({"until": ["\n"], "do_sample": True, "temperature": 0.8}, 0.8),
                             ({"until": ["\n"]}, 1.0)):  # neither do_sample nor temperature: offline samples at 1.0
        req = Instance(request_type="generate_until", doc={}, idx=0, metadata=("t_sampled", 0, 1), arguments=("Q:", gen))
        with pytest.raises(ServedRefusal, match=f"t_sampled: samples \\(temperature {temperature}\\)"):
            lm.generate_until([req])  # port 9 answers nothing: a request would fail differently
