"""The toy language model and the loglikelihood requests that the grouped-scoring tests share
(test_grouped_logic.py: the in-process engine; test_grouped_served.py: the server): a token's logprob is a function
of the tokens before it, on a coarse grid so that ties happen."""

from __future__ import annotations

import hashlib

from suite.stages.evaluate.grouping import MAX_TOKEN_IDS

VOCAB = 300


def toy_logprob(prefix, token: int) -> float:
    """log p(token | prefix) of the toy model, on a 0.5 grid (ties between tokens are common)."""
    h = hashlib.sha256(repr((tuple(prefix)[-3:], token)).encode()).digest()
    return -0.5 * (h[0] % 12)


def toy_top(prefix) -> int:
    """The greedy token: the lowest id among the highest logprobs (torch.argmax's first maximum)."""
    scores = [toy_logprob(prefix, t) for t in range(VOCAB)]
    return scores.index(max(scores))


class Hook:
    """lm-eval's cache hook, recording what it is given."""

    def __init__(self):
        self.partials = []

    def add_partial(self, attr, key, answer):
        self.partials.append((attr, key, answer))


def toy_requests() -> list:
    """(cache key, context tokens, continuation tokens): 6 four-choice questions (20-30 tokens: some longer than a
    short max_length), a duplicate, a multi-token continuation, a key-less request, a context with more distinct
    one-token continuations than vLLM takes at once, and a one-token context."""
    reqs = []
    contexts = [list(range(5 + q, 25 + 3 * q)) for q in range(6)]
    for q, ctx in enumerate(contexts):
        for choice in (201, 202, 203, 204):  # " A" .. " D"
            reqs.append(((f"q{q}", f"c{choice}"), ctx, [choice]))
    reqs.append((("q0", "c201"), contexts[0], [201]))  # a duplicate
    reqs.append((("q1", "long"), contexts[1], [7, 8, 9]))  # a multi-token continuation: lm-eval's path
    reqs.append((None, [3, 4], [5]))  # no cache key (as loglikelihood_rolling's windows)
    wide = list(range(40, 50))
    reqs += [((f"w{t}", "x"), wide, [t]) for t in range(MAX_TOKEN_IDS + 2)]  # too many ids for one request
    reqs.append((("short", "x"), [9], [10]))
    return reqs
