"""time_requests: lm-eval's calls into the model are timed by request type, a nested call once (the outer type)."""

from __future__ import annotations

import time

from suite.stages.evaluate.stage import time_requests


class FakeLM:
    def loglikelihood(self, requests):
        time.sleep(0.05)
        return [(0.0, True)] * len(requests)

    def loglikelihood_rolling(self, requests):  # as some backends do: through loglikelihood
        return [x for x, _ in self.loglikelihood(requests)]

    def generate_until(self, requests):
        time.sleep(0.02)
        return ["" for _ in requests]


def test_request_types_are_timed_and_a_nested_call_counts_once():
    lm = FakeLM()
    seconds = time_requests(lm)
    assert getattr(lm, "loglikelihood")([1, 2]) == [(0.0, True)] * 2  # what lm-eval calls: getattr(lm, reqtype)
    lm.loglikelihood_rolling([1])
    lm.generate_until([1, 2, 3])
    assert set(seconds) == {"loglikelihood", "loglikelihood_rolling", "generate_until"}
    assert 0.05 <= seconds["loglikelihood"] < 0.1  # its own call only, not the one inside rolling
    assert 0.05 <= seconds["loglikelihood_rolling"] < 0.1
    assert 0.02 <= seconds["generate_until"] < 0.07


def test_a_request_that_raises_is_still_timed():
    class Broken:
        def generate_until(self, requests):
            raise RuntimeError("engine died")

    lm = Broken()
    seconds = time_requests(lm)
    try:
        lm.generate_until([1])
    except RuntimeError:
        pass
    assert list(seconds) == ["generate_until"]
