"""Grouped loglikelihood on a server (``GroupedServedCompletions``) against lm-eval's own API path, over HTTP, on one
toy language model.

A small HTTP server answers /v1/completions from a deterministic toy model, shaped as vLLM answers: prompt
log-probabilities (``echo``, ``logprobs: 1``) for lm-eval's ``local-completions`` path, and for the grouped path one
generated token with the requested ids' log-probabilities named ``token_id:<id>``. What must agree, request by
request: truncation to the API model's max_length, the original order, duplicates, ties in is_greedy, contexts with
more distinct one-token continuations than vLLM takes at once, the cache hook. That the real server gives the
offline engine's numbers is tests/stages/test_served.py's integration test.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("lm_eval")
from lm_eval.models.api_models import TemplateAPI  # noqa: E402

from conftest import DEMO_MODEL, needs_demo_model  # noqa: E402
from grouped_toy import Hook, toy_logprob, toy_requests, toy_top  # noqa: E402
from suite.stages.evaluate.grouping import MAX_TOKEN_IDS  # noqa: E402
from suite.stages.evaluate.served import GroupedServedCompletions, parse_grouped  # noqa: E402

class ToyServer(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ToyServer.seen.append(body)
        if body.get("echo"):  # lm-eval's path: each prompt's log-probs, then one generated token
            choices = []
            for index, prompt in enumerate(body["prompt"]):
                lps, tops = [None], [None]
                for i in range(1, len(prompt)):
                    prefix, top = prompt[:i], toy_top(prompt[:i])
                    lps.append(toy_logprob(prefix, prompt[i]))
                    tops.append({str(prompt[i]): lps[-1], str(top): toy_logprob(prefix, top)})
                gen = toy_top(prompt)
                lps.append(toy_logprob(prompt, gen))
                tops.append({str(gen): lps[-1]})
                choices.append({"index": index, "logprobs": {"token_logprobs": lps, "top_logprobs": tops}})
        else:  # the grouped path
            prompt, ids = body["prompt"], body["logprob_token_ids"]
            assert body["max_tokens"] == 1 and body["temperature"] == 0 and body["logprobs"] == 1
            assert body["return_tokens_as_token_ids"] is True and 0 < len(ids) <= MAX_TOKEN_IDS
            greedy = toy_top(prompt)
            top = {f"token_id:{greedy}": toy_logprob(prompt, greedy)}
            top.update({f"token_id:{t}": toy_logprob(prompt, t) for t in ids})
            choices = [{"index": 0, "logprobs": {"tokens": [f"token_id:{greedy}"],
                                                 "token_logprobs": [toy_logprob(prompt, greedy)],
                                                 "top_logprobs": [top]}}]
        data = json.dumps({"choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def toy_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ToyServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ToyServer.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def toy_lm(url: str, max_length: int, concurrent: int) -> GroupedServedCompletions:
    """The real class, built as served_lm builds it (the demo model's tokenizer; the requests here are token ids)."""
    lm = GroupedServedCompletions(url, str(DEMO_MODEL), max_length, 1234, concurrent)
    lm.cache_hook = Hook()
    return lm


@needs_demo_model()
@pytest.mark.parametrize("max_length,concurrent", [(4096, 1), (24, 4)])
def test_grouped_served_answers_are_lm_evals_request_by_request(toy_url, max_length, concurrent):
    reqs = toy_requests()
    lm = toy_lm(toy_url, max_length, 1)
    expected = TemplateAPI._loglikelihood_tokens(lm, reqs)  # lm-eval's local-completions path, one at a time
    assert all(body.get("echo") for body in ToyServer.seen)
    ToyServer.seen.clear()

    lm = toy_lm(toy_url, max_length, concurrent)
    lm._grouping = True  # as GroupedLoglikelihood.loglikelihood sets it
    got = lm._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert got == expected
    assert any(g for _, g in got) and not all(g for _, g in got)  # is_greedy both ways, ties among them
    grouped = [body for body in ToyServer.seen if not body.get("echo")]
    assert len(grouped) == lm.counts["requests"] == 6 + 1 + 1
    assert lm.counts == {"pairs": len(reqs), "grouped_pairs": 6 * 4 + 3, "requests": 8}
    assert max(len(body["prompt"]) for body in grouped) == min(30, max_length - 2)  # the API model's truncation
    keyed = {(r[0], a) for r, a in zip(reqs, expected) if r[0] is not None}
    assert {(k, a) for _, k, a in lm.cache_hook.partials} == keyed


@needs_demo_model()
def test_many_requests_in_flight_keep_their_connections(toy_url, caplog):
    """A connection per worker: with more requests in flight than requests' default pool keeps (10), none is opened
    and dropped per request (urllib3 warns for each: thousands of lines for a full MMLU on a GPU)."""
    lm = toy_lm(toy_url, 4096, 32)
    contexts = [[q, q + 1, q + 2] for q in range(200)]
    scored = lm._grouped_logprobs(contexts, [[201, 202]] * len(contexts), disable_tqdm=True)
    assert [greedy for _, greedy in scored] == [toy_top(c) for c in contexts]
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]


def test_an_answer_without_a_requested_token_is_refused():
    ok = {"choices": [{"logprobs": {"tokens": ["token_id:7"], "token_logprobs": [-0.1],
                                    "top_logprobs": [{"token_id:7": -0.1, "token_id:3": -2.0}]}}]}
    assert parse_grouped(ok, [3]) == ({7: -0.1, 3: -2.0}, 7)
    with pytest.raises(ValueError, match="tokens \\[4\\]"):
        parse_grouped(ok, [3, 4])
    named = {"choices": [{"logprobs": {"tokens": [" A"], "token_logprobs": [-0.1], "top_logprobs": [{" A": -0.1}]}}]}
    with pytest.raises(ValueError, match="return_tokens_as_token_ids"):
        parse_grouped(named, [3])
    with pytest.raises(ValueError, match="without its log-probabilities"):
        parse_grouped({"choices": []}, [3])
