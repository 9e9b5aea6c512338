"""Grouped loglikelihood scoring: one request per distinct context where every continuation is one token.

lm-eval scores each (context, continuation) pair as a request of its own with the prompt's log-probabilities
(``prompt_logprobs=1`` in its vLLM backend, ``echo`` + ``logprobs`` in its API models): a 4-choice 5-shot MMLU
question's ~700-token context is prefilled 4 times, with a full-vocabulary log-softmax at every prompt position, and
vLLM's prefix cache is not used for requests that ask for prompt log-probabilities, so the few-shot exemplars that a
subject's questions share are prefilled again each time: for a 0.5B model on a GPU a few dozen pairs a second per
engine, about half an hour a variant for MMLU + C-Eval 5-shot.

Where a continuation is one token (MMLU's and C-Eval's " A" .. " D"), the two numbers lm-eval wants come from one
request on the context alone: one generated token, temperature 0, and vLLM's ``logprob_token_ids`` (vLLM >= 0.26, in
``SamplingParams`` and in the completions endpoint) set to the continuations' tokens. vLLM gathers those from the raw
log-softmax of the last position's logits (its default ``logprobs_mode``, raw_logprobs, as for prompt log-probs), so
``log p(continuation | context)`` is the same quantity. ``is_greedy`` is lm-eval's ``_parse_logprobs`` rule: the
continuation's logprob is at least the top token's (vLLM returns the sampled, greedy token's logprob beside the
requested ones), so a tie counts as greedy, as it does there. The prompt is cut on the left exactly as lm-eval cuts
``context + continuation``. Everything else (multi-token continuations, loglikelihood_rolling's windows, a context
with more distinct continuation tokens than vLLM takes at once) goes through lm-eval's own path, untouched.

``GroupedLoglikelihood`` is the bookkeeping, shared by the two engines that score this way: the in-process one
(``suite.stages.evaluate.grouped.GroupedVLLM``) and the served one (``suite.stages.evaluate.served``). Each gives
``_grouped_logprobs``, how one batch of contexts is sent, and ``_grouped_keep``, how many context tokens lm-eval's
own path keeps for a one-token continuation. This module imports neither lm-eval nor vLLM.
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

# vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS in 0.26 and 0.32: a context with more distinct one-token
# continuations than this takes lm-eval's path (no multiple-choice task here comes near it)
MAX_TOKEN_IDS = 128
ENCODE_BATCH = 1024  # strings per tokenizer call (a bound on the memory of one batch, and the progress bar's step)


def encode_threads() -> int:
    """Threads that tokenize side by side: the CPUs this process may run on, at most 8."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


class GroupedLoglikelihood:
    """A mixin before an lm-eval model (``class M(GroupedLoglikelihood, VLLM)``): its ``loglikelihood`` scores
    one-token continuations one request per context.

    ``counts`` says what it did: ``pairs`` (loglikelihood pairs asked for), ``grouped_pairs`` (of those, scored by
    the grouped path), ``requests`` (requests the grouped path sent)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.counts = {"pairs": 0, "grouped_pairs": 0, "requests": 0}
        self._grouping = False

    def _grouped_keep(self) -> int:
        """Context tokens lm-eval's own path keeps for a one-token continuation."""
        raise NotImplementedError

    def _grouped_logprobs(self, contexts: list[list[int]], token_ids: list[list[int]],
                          disable_tqdm: bool) -> list[tuple[dict[int, float], int]]:
        """For each context, the log-probabilities of its ``token_ids`` as the next token, and the greedy token's id
        (which the dict holds too), in the order given."""
        raise NotImplementedError

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        # only the multiple-choice path: loglikelihood_rolling calls _loglikelihood_tokens directly
        if getattr(self, "enable_thinking", False):
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)  # lm-eval's refusal (ValueError)
        self._grouping = True
        try:
            return self._loglikelihood_tokens(self.encode_pairs([r.args for r in requests], disable_tqdm),
                                              disable_tqdm=disable_tqdm)
        finally:
            self._grouping = False

    def encode_pairs(self, pairs, disable_tqdm: bool = False):
        """lm-eval's ``loglikelihood`` tokenization (``_encode_pair``: the context's trailing spaces moved to the
        continuation, ``whole = tok_encode(context + continuation)``, ``continuation = whole[len(context):]``), the
        same token ids, but each distinct context encoded once and every string through the tokenizer in batches.
        lm-eval encodes two strings per pair, one call each: for 5-shot MMLU + C-Eval (61,582 pairs, ~700-token
        contexts) that took minutes of a GPU evaluation whose model work took seconds; batched, it is about 3x
        faster (measured on 2 CPU cores, 6,284 real pairs, Qwen2.5's tokenizer)."""
        if getattr(self, "backend", "causal") != "causal":
            return [((c, k), *self._encode_pair(c, k)) if c else self._empty_context_pair(c, k) for c, k in pairs]
        moved = []  # (context, continuation) after lm-eval's trailing-space move; None: an empty context
        for context, continuation in pairs:
            if not context:
                moved.append(None)
                continue
            n_spaces = len(context) - len(context.rstrip())
            moved.append((context[:-n_spaces], context[-n_spaces:] + continuation) if n_spaces else
                         (context, continuation))
        contexts = list(dict.fromkeys(m[0] for m in moved if m))
        wholes = [m[0] + m[1] for m in moved if m]
        encoded = []
        strings = contexts + wholes
        chunks = [strings[i:i + ENCODE_BATCH] for i in range(0, len(strings), ENCODE_BATCH)]
        # threads: the Rust tokenizer lets go of the GIL while it encodes a batch, so chunks encode side by side
        # (TOKENIZERS_PARALLELISM, which the recipes set false, is about the tokenizer's own threads, not these).
        # The first chunk goes alone: transformers' fast tokenizer may switch the backend's truncation / padding off
        # on a call (a mutable borrow, "Already borrowed" if another thread is encoding); after it, calls only read.
        with ThreadPoolExecutor(max_workers=encode_threads()) as pool, \
                tqdm(total=len(strings), disable=disable_tqdm, desc="Tokenizing inputs (batched)") as bar:
            if chunks:
                encoded.extend(self.tok_encode(chunks[0]))
                bar.update(len(chunks[0]))
            for chunk, ids in zip(chunks[1:], pool.map(self.tok_encode, chunks[1:])):
                encoded.extend(ids)
                bar.update(len(chunk))
        context_enc = dict(zip(contexts, encoded[:len(contexts)]))
        whole_enc = iter(encoded[len(contexts):])
        out = []
        for (context, continuation), m in zip(pairs, moved):
            if m is None:
                out.append(self._empty_context_pair(context, continuation))
                continue
            c, w = context_enc[m[0]], next(whole_enc)
            out.append(((context, continuation), c, w[len(c):]))
        return out

    def _empty_context_pair(self, context, continuation):
        """lm-eval's ``loglikelihood`` for an empty context: BOS (or EOS) as the context."""
        continuation_enc = self.tok_encode(continuation, add_special_tokens=False)
        if self.prefix_token_id != continuation_enc[0]:
            return (context, continuation), [self.prefix_token_id], continuation_enc
        return (context, continuation), continuation_enc[:1], continuation_enc[1:]

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        if not self._grouping:
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, **kwargs)
        self.counts["pairs"] += len(requests)
        keep = self._grouped_keep()
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        rest: list[int] = []
        for i, (_, context_enc, continuation_enc) in enumerate(requests):
            if len(continuation_enc) == 1 and context_enc:
                groups[tuple(context_enc[-keep:])].append(i)
            else:
                rest.append(i)
        for context, members in list(groups.items()):
            if len({requests[i][2][0] for i in members}) > MAX_TOKEN_IDS:
                rest.extend(groups.pop(context))

        answers: list[tuple[float, bool] | None] = [None] * len(requests)
        if rest:
            for i, answer in zip(rest, super()._loglikelihood_tokens([requests[i] for i in rest],
                                                                      disable_tqdm=disable_tqdm, **kwargs)):
                answers[i] = answer
        if groups:
            for i, answer in self._score_grouped(requests, groups, disable_tqdm).items():
                answers[i] = answer
                cache_key = requests[i][0]
                if cache_key is not None:
                    self.cache_hook.add_partial("loglikelihood", cache_key, answer)
        self.counts["grouped_pairs"] += sum(len(m) for m in groups.values())
        self.counts["requests"] += len(groups)
        assert all(a is not None for a in answers)
        return answers

    def _score_grouped(self, requests, groups, disable_tqdm: bool) -> dict[int, tuple[float, bool]]:
        # longest first, as lm-eval orders its own requests (the batch's memory peak comes early, not late)
        contexts = sorted(groups, key=len, reverse=True)
        token_ids = [sorted({requests[i][2][0] for i in groups[c]}) for c in contexts]
        scored = self._grouped_logprobs([list(c) for c in contexts], token_ids, disable_tqdm)
        answers = {}
        for context, (logprobs, greedy) in zip(contexts, scored, strict=True):
            top = logprobs[greedy]
            for i in groups[context]:
                value = logprobs[requests[i][2][0]]
                answers[i] = (value, value >= top)
        return answers
