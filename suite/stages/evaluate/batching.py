"""The batch limits of ``vllm serve`` on this machine, for the evaluation engines that must batch as a server does
(suite.stages.evaluate.stage: the compile cache; suite.stages.evaluate.served: requests in flight)."""

from __future__ import annotations


def serve_batch_limits(engine_args: dict) -> dict[str, int]:
    """``vllm serve``'s default max_num_batched_tokens and max_num_seqs on this machine, for those of the two
    that ``engine_args`` does not set (``EngineArgs.get_batch_defaults``: by device memory, name and world size,
    the values ``EngineArgs`` itself takes for the OpenAI server). An engine built with them compiles the graph
    the variant's ``vllm serve`` will ask for, so the server's start reads torch.compile's cache instead of
    compiling again."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    world = int(engine_args.get("tensor_parallel_size", 1)) * int(engine_args.get("pipeline_parallel_size", 1))
    tokens, seqs = EngineArgs.get_batch_defaults(world)
    found = {"max_num_batched_tokens": tokens.get(UsageContext.OPENAI_API_SERVER),
             "max_num_seqs": seqs.get(UsageContext.OPENAI_API_SERVER)}
    return {k: int(v) for k, v in found.items() if v and engine_args.get(k) is None}
