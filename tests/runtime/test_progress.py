"""Stage progress records: written by a stage (suite.runtime.progress, here through the evaluate stage's request
counter), read back by the parent (suite.orchestrate.progress.poll) as counts, once per change."""

from __future__ import annotations

from suite.orchestrate.progress import StageProgress, poll
from suite.runtime import progress
from suite.stages.evaluate.timing import time_requests


def test_lm_eval_requests_are_counted_into_the_progress_file_and_the_parent_reads_them(tmp_path, monkeypatch):
    vdir = tmp_path / "variants" / "fp8-kv"
    vdir.mkdir(parents=True)
    path = progress.path_for(vdir / "evaluate.result.json")
    assert path.name == "evaluate.progress.json"
    monkeypatch.setenv(progress.ENV, str(path))
    seen, heard = {}, []

    class LM:
        def generate_until(self, requests, disable_tqdm=False):
            poll(tmp_path, seen, lambda *e: heard.append(e))  # the parent looks while the call runs
            return [""] * len(requests)

    lm = LM()
    time_requests(lm)
    lm.generate_until(list(range(5)))
    poll(tmp_path, seen, lambda *e: heard.append(e))
    poll(tmp_path, seen, lambda *e: heard.append(e))  # nothing new: nothing reported
    assert heard == [("evaluate", "fp8-kv", "progress", StageProgress("lm-eval generate_until", 0, 5)),
                     ("evaluate", "fp8-kv", "progress", StageProgress("lm-eval generate_until", 5, 5))]
    assert str(heard[-1][3]) == "lm-eval generate_until 5/5"
