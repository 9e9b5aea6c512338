"""Grouped loglikelihood scoring with lm-eval's in-process vLLM engine (``suite.stages.evaluate.grouping`` says what
grouped scoring is and why): each distinct context is one ``SamplingParams(max_tokens=1, temperature=0,
logprob_token_ids=...)`` request, handed to the engine in lm-eval's batches.

Runs in the serve environment only (imports lm-eval and vLLM at module level).
"""

from __future__ import annotations

from lm_eval.models.vllm_causallms import VLLM
from tqdm import tqdm

from suite.stages.evaluate.grouping import GroupedLoglikelihood


class GroupedVLLM(GroupedLoglikelihood, VLLM):
    """lm-eval's ``VLLM`` with ``loglikelihood`` scoring one-token continuations one request per context."""

    def _grouped_keep(self) -> int:
        return max(1, self.max_length - 2)  # VLLM keeps (context + continuation)[-(max_length - 1):]

    def _grouped_logprobs(self, contexts, token_ids, disable_tqdm):
        from vllm import SamplingParams

        params = [SamplingParams(temperature=0, max_tokens=1, detokenize=False, logprob_token_ids=ids)
                  for ids in token_ids]
        outputs = []
        chunk = len(contexts) if self.batch_size == "auto" else max(1, int(self.batch_size))
        with tqdm(total=len(contexts), disable=disable_tqdm, desc="Running grouped loglikelihood requests") as bar:
            for start in range(0, len(contexts), chunk):
                part = slice(start, start + chunk)
                outputs.extend(self._model_generate(requests=contexts[part], generate=True,
                                                    sampling_params=params[part]))
                bar.update(len(contexts[part]))
        scored = []
        for output in outputs:
            completion = output.outputs[0]
            logprobs = {t: float(getattr(lp, "logprob", lp)) for t, lp in completion.logprobs[0].items()}
            scored.append((logprobs, completion.token_ids[0]))
        return scored
