"""lm-eval's ``local-completions`` model made to score as its offline vLLM backend does, against a ``vllm serve``.

``eval.engine: served`` scores a variant on the benchmark stage's server (one engine start per variant
instead of two). lm-eval's API model and its vLLM model (``lm_eval/models/api_models.py``,
``openai_completions.py``, ``vllm_causallms.py``, lm-eval 0.4.13) differ where it matters for paired
statistics; this subclass takes the offline backend's side each time:

- tokens: the requests are sent as token ids (``tokenized_requests``), tokenized here with the model's
  Hugging Face tokenizer (``tokenizer_backend: huggingface``, not the server's ``/tokenize``) the way
  ``VLLM.tok_encode`` does: the tokenizer's own special tokens (BOS where it adds one), none for a text
  that already starts with BOS. The API model would add none (``add_bos_token=False``).
- generation: ``VLLM.modify_gen_kwargs``'s settings (lm-eval's ``normalize_gen_kwargs``: temperature 0
  with do_sample false, the task's temperature otherwise, 1.0 (``SamplingParams``' default) where the
  task's generation_kwargs set neither; the task's stop sequences plus the EOS text; max_gen_toks;
  ``skip_special_tokens`` and ``spaces_between_special_tokens`` off), and the neutral penalties and
  top-p/top-k/min-p of ``SamplingParams``: a server fills a request's unset fields from the model's
  ``generation_config.json`` (``--generation-config auto``, e.g. Qwen2.5's repetition_penalty 1.05),
  which ``LLM.generate`` with explicit ``SamplingParams`` never applies. Texts are cut at the stop
  sequences afterwards (``postprocess_generated_text``), as offline. A server takes at most
  ``SERVER_STOP_STRINGS`` stop sequences a request (the OpenAI API's 4; vLLM 0.32's ``VLLM_MAX_STOP_STRINGS``
  refuses more with HTTP 400, and HumanEval has 5 plus the EOS text): the first 4 go to the server, and the cut
  afterwards applies them all, so a text is the offline one (a generation that went past a dropped stop sequence
  is cut back at it; it only cost tokens).
- loglikelihood: prompt log-probs through ``echo`` + ``logprobs: 1`` (``max_length`` = max_model_len, so
  the truncation and the rolling windows are the offline backend's); with ``eval.loglikelihood: grouped``, one
  request per context for one-token choices (``GroupedServedCompletions``, ``suite.stages.evaluate.grouping``):
  ``max_tokens`` 1, temperature 0, ``logprob_token_ids`` the choices' tokens, ``return_tokens_as_token_ids`` so
  that each log-prob is named by its token id, not by a decoded text two tokens may share. The server's JSON
  carries each value as the float vLLM computed (clamped at -9999, as the OpenAI API does: no real choice gets
  there).
- chat template: the tokenizer's own, applied with the offline call's arguments.

Refused (``ServedRefusal``), with the reason: a task that samples (temperature > 0: the offline engine
draws from one seeded stream, a server from a per-request seed, so no item would pair), a chat template
where the tokenizer has none (the offline backend may fall back to one of vLLM's). Not matched: a
generation context longer than max_model_len - max_gen_toks is left-truncated by one token more than
offline (lm-eval's API model reserves a token); none of the suite's tasks comes near it.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import jinja2
import requests
from lm_eval.models.openai_completions import LocalCompletionsAPI
from lm_eval.models.utils import (
    _add_special_kwargs,
    handle_stop_sequences,
    has_bos_prefix,
    normalize_gen_kwargs,
    postprocess_generated_text,
)
from requests.adapters import HTTPAdapter
from tenacity import retry, stop_after_attempt, wait_exponential
from tqdm import tqdm

from suite.runtime.engine.batching import serve_max_num_seqs
from suite.stages.evaluate.grouping import GroupedLoglikelihood

# vllm.SamplingParams' defaults for what a server would otherwise take from generation_config.json
# (vllm/entrypoints/openai/completion/protocol.py, CompletionRequest._DEFAULT_SAMPLING_PARAMS)
NEUTRAL_SAMPLING = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_p": 1.0,
                    "top_k": 0, "min_p": 0.0}
# what the offline backend samples with when a task's generation_kwargs set neither do_sample nor temperature
# (lm-eval's normalize_gen_kwargs then sets no temperature, and SamplingParams' default is 1.0)
SAMPLING_PARAMS_TEMPERATURE = 1.0
SERVER_STOP_STRINGS = 4  # stop sequences a completions request may carry (the OpenAI API's; vLLM's default)
REQUEST_TIMEOUT_S = 3600  # one request (lm-eval's default, 300 s, is short for a long generation on 2 CPU cores)


class ServedRefusal(RuntimeError):
    """What a served evaluation cannot score as the offline backend would."""


def offline_gen_kwargs(gen_kwargs: dict, eos: str | None, default_max_gen_toks: int) -> tuple[dict, list[str], int]:
    """(sampling kwargs, stop sequences, max_gen_toks) as lm-eval's vLLM backend makes them
    (``VLLM.modify_gen_kwargs``, lm-eval 0.4.13)."""
    kwargs = normalize_gen_kwargs(copy.deepcopy(gen_kwargs), default_max_gen_toks=default_max_gen_toks)
    until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
    max_gen_toks = int(kwargs.pop("max_gen_toks", default_max_gen_toks))
    kwargs.pop("do_sample", None)
    return {"skip_special_tokens": False, "spaces_between_special_tokens": False} | kwargs, until, max_gen_toks


class ServedCompletions(LocalCompletionsAPI):
    """``local-completions`` on the server's /v1/completions, scoring as ``lm_eval.models.vllm_causallms.VLLM``
    does (module docstring). The API key is lm-eval's: ``OPENAI_API_KEY`` in the environment."""

    def __init__(self, base_url: str, model: str, max_model_len: int, seed: int, num_concurrent: int,
                 max_gen_toks: int | None = None):
        extra = {"max_gen_toks": max_gen_toks} if max_gen_toks else {}  # else lm-eval's 256, as offline
        super().__init__(base_url=base_url, model=model, tokenizer_backend="huggingface", tokenized_requests=True,
                         num_concurrent=num_concurrent, max_retries=3, seed=seed, max_length=max_model_len,
                         batch_size=1, timeout=REQUEST_TIMEOUT_S, **extra)
        self.add_bos_token = None  # the offline backend's default: the tokenizer's own special tokens
        eos = self.tokenizer.decode(self.eot_token_id) if self.eot_token_id is not None else ""  # VLLM.generate_until's
        self.eos_text = eos or getattr(self.tokenizer, "eos_token", None)

    def tok_encode(self, string, left_truncate_len=None, add_special_tokens=None, **kwargs):
        """``VLLM.tok_encode``: special tokens as the tokenizer adds them, none for a text starting with BOS."""
        if not string:
            return []
        strings = [string] if isinstance(string, str) else list(string)
        bos = self.tokenizer.decode(self.prefix_token_id) if self.prefix_token_id is not None else None
        special = {**kwargs, **_add_special_kwargs(add_special_tokens, self.add_bos_token)}
        out = []
        for s in strings:
            kw = {**special, "add_special_tokens": False} if has_bos_prefix(s, bos) else special
            ids = self.tokenizer(s, return_attention_mask=False, **kw).input_ids
            out.append(ids[-left_truncate_len:] if left_truncate_len else ids)
        return out[0] if isinstance(string, str) else out

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The tokenizer's own template, called as ``VLLM.apply_chat_template`` calls it."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ServedRefusal(f"{self.model}: the tokenizer has no chat template of its own, and the offline backend "
                                "may take one of vLLM's fallbacks: score this recipe with eval.engine: vllm")
        args = dict(tokenize=False, add_generation_prompt=add_generation_prompt,
                    continue_final_message=not add_generation_prompt, enable_thinking=None)
        try:
            return self.tokenizer.apply_chat_template(chat_history, **args)
        except jinja2.exceptions.TemplateError:  # as offline: without the system role
            return self.tokenizer.apply_chat_template([m for m in chat_history if m["role"] != "system"], **args)

    def _create_payload(self, messages, generate=False, gen_kwargs=None, seed=1234, eos=None, **kwargs) -> dict:
        if not generate:  # prompt log-probs: echo, logprobs 1, one generated token (lm-eval's payload)
            return {**super()._create_payload(messages, generate=False, seed=seed), **NEUTRAL_SAMPLING}
        sampling, until, max_gen_toks = offline_gen_kwargs(gen_kwargs or {}, self.eos_text, self._max_gen_toks)
        return {"prompt": messages, "model": self.model, "max_tokens": max_gen_toks, "seed": seed,
                "stop": until[:SERVER_STOP_STRINGS],  # the rest are cut afterwards (generate_until)
                "temperature": SAMPLING_PARAMS_TEMPERATURE, **NEUTRAL_SAMPLING, **sampling}

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        settings = [offline_gen_kwargs(r.args[1], self.eos_text, self._max_gen_toks) for r in requests]
        for r, (sampling, _, _) in zip(requests, settings):
            temperature = float(sampling.get("temperature", SAMPLING_PARAMS_TEMPERATURE))
            if temperature > 0.0:
                raise ServedRefusal(
                    f"{r.task_name}: samples (temperature {temperature}); served scoring pairs with the "
                    "offline backend only when greedy (the offline engine draws from one seeded stream, a server "
                    "from a per-request seed): score this task with eval.engine: vllm")
        texts = super().generate_until(requests, disable_tqdm=disable_tqdm)
        return [postprocess_generated_text(t, until, None) for t, (_, until, _) in zip(texts, settings)]


TOKEN_ID_PREFIX = "token_id:"  # how vLLM names a token with return_tokens_as_token_ids (format_token_id_placeholder)


class GroupedServedCompletions(GroupedLoglikelihood, ServedCompletions):
    """``ServedCompletions`` whose loglikelihood scores one-token choices one request per context."""

    def _grouped_keep(self) -> int:
        return max(1, self.max_length - 1)  # the API model keeps (context + continuation)[-max_length:] (max_length:
        # max_model_len - 1, one token kept for generation)

    def _grouped_logprobs(self, contexts, token_ids, disable_tqdm):
        post = retry(stop=stop_after_attempt(self.max_retries), wait=wait_exponential(multiplier=0.5, min=1, max=10),
                     reraise=True)(self._grouped_request)
        workers = max(1, self._concurrent)
        with requests.Session() as session, ThreadPoolExecutor(max_workers=workers) as pool, \
                tqdm(total=len(contexts), disable=disable_tqdm, desc="Requesting grouped loglikelihoods") as bar:
            # a connection per worker (requests' default pool keeps 10: more workers open and drop one per request)
            session.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=workers))
            session.mount("https://", HTTPAdapter(pool_connections=1, pool_maxsize=workers))
            scored = []
            for answer in pool.map(lambda job: post(session, *job), zip(contexts, token_ids)):
                scored.append(answer)
                bar.update(1)
        return scored

    def _grouped_request(self, session, context: list[int], ids: list[int]) -> tuple[dict[int, float], int]:
        payload = {"model": self.model, "prompt": context, "max_tokens": 1, "temperature": 0.0, "seed": self._seed,
                   "logprobs": 1, "logprob_token_ids": ids, "return_tokens_as_token_ids": True, **NEUTRAL_SAMPLING}
        response = session.post(self.base_url, json=payload, headers=self.header, timeout=self.timeout)
        if not response.ok:
            raise RuntimeError(f"{self.base_url}: HTTP {response.status_code} for a grouped loglikelihood request: "
                               f"{response.text[:500]}")
        return parse_grouped(response.json(), ids)


def parse_grouped(answer: dict, ids: list[int]) -> tuple[dict[int, float], int]:
    """(log-probability by token id, the greedy token's id) from a completion of one token asked for ``ids``'
    log-probabilities with ``return_tokens_as_token_ids``; a ValueError when it lacks one of them."""
    try:
        logprobs = answer["choices"][0]["logprobs"]
        greedy = _token_id(logprobs["tokens"][0])
        values = {_token_id(k): float(v) for k, v in logprobs["top_logprobs"][0].items()}
        values.setdefault(greedy, float(logprobs["token_logprobs"][0]))
    except (KeyError, IndexError, TypeError) as e:
        raise ValueError(f"a grouped loglikelihood answer without its log-probabilities ({e!r})") from None
    if missing := [i for i in ids if i not in values]:
        raise ValueError(f"a grouped loglikelihood answer without the log-probabilities of tokens {missing[:5]}")
    return values, greedy


def _token_id(name: str) -> int:
    if not isinstance(name, str) or not name.startswith(TOKEN_ID_PREFIX):
        raise ValueError(f"a token named {name!r}, not {TOKEN_ID_PREFIX}<id> (return_tokens_as_token_ids)")
    return int(name[len(TOKEN_ID_PREFIX):])


def served_lm(config) -> ServedCompletions:
    """The served model for an ``EvaluateConfig`` with ``backend: served`` and its ``base_url``."""
    if not config.base_url:
        raise ServedRefusal("backend 'served' needs base_url (the benchmark stage sets it to its server's)")
    concurrency = int(config.batch_size) if str(config.batch_size).isdigit() else auto_concurrency(config.engine)
    model = GroupedServedCompletions if config.loglikelihood == "grouped" else ServedCompletions
    lm = model(config.base_url, config.engine.model, config.engine.max_model_len, config.seed,
               concurrency, config.max_gen_toks)
    lm.requests_in_flight = concurrency
    return lm


def auto_concurrency(engine) -> int:
    """Requests in flight for eval.batch_size 'auto' (an int batch_size is taken as it is): as many as the server
    decodes at once (its max_num_seqs: the recipe's, else vllm serve's default here, e.g. 1,024 on a large GPU), which is
    what lm-eval's offline engine gets when it is handed every request at once. The batch a sequence is decoded in
    changes its greedy text; with an FP8 KV cache far more than in BF16 (full GSM8K offline at 64 sequences against
    1,024: under a quarter of FP8 KV generations identical, most of BF16's; docs/06-gate-and-statistics.md), so the
    served scoring runs at the offline engine's batch, not at a fixed 64."""
    seqs = serve_max_num_seqs(engine.engine_args)
    return seqs if seqs else FALLBACK_CONCURRENCY


FALLBACK_CONCURRENCY = 64  # where vLLM names no default
