"""The batch limits of ``vllm serve`` on this machine, for the engines that must batch as a server does: the evaluation
engines (suite.stages.evaluate.stage: the compile cache; suite.stages.evaluate.served: requests in flight) and the
benchmark's offline ceiling (suite.stages.benchmark.offline: the server's engine without its HTTP front end)."""

from __future__ import annotations


# engine arguments from which vLLM derives the two limits itself (EngineArgs._set_default_max_num_seqs_and_batched
# _tokens_args: the one set caps the other; no chunked prefill raises the tokens to max_model_len; performance_mode
# throughput doubles both). Where a recipe sets any of them, the engine keeps vLLM's own derivation.
DERIVED_FROM = ("max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill", "performance_mode")


def _serve_defaults(engine_args: dict) -> tuple[int | None, int | None]:
    """(max_num_batched_tokens, max_num_seqs) that ``EngineArgs.get_batch_defaults`` gives the OpenAI server here:
    by device memory, name and world size."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    world = int(engine_args.get("tensor_parallel_size", 1)) * int(engine_args.get("pipeline_parallel_size", 1))
    tokens, seqs = EngineArgs.get_batch_defaults(world)
    return tokens.get(UsageContext.OPENAI_API_SERVER), seqs.get(UsageContext.OPENAI_API_SERVER)


def serve_batch_limits(engine_args: dict, max_model_len: int) -> dict[str, int]:
    """``vllm serve``'s max_num_batched_tokens and max_num_seqs on this machine, as ``EngineArgs`` derives them
    when a server is given neither (its defaults, tokens capped at max_num_seqs x max_model_len, sequences at the
    tokens). An engine built with them compiles the graph the variant's ``vllm serve`` will ask for, so the
    server's start reads torch.compile's cache instead of compiling again. Empty where ``engine_args`` sets any
    of ``DERIVED_FROM``: vLLM then derives the limits from those (a max_num_batched_tokens of 512 caps
    max_num_seqs at 512), which passing both explicitly would undo."""
    if any(engine_args.get(k) is not None for k in DERIVED_FROM):
        return {}
    return serve_engine_limits(engine_args, max_model_len)  # with none of them set: the server's defaults, capped


def serve_max_num_seqs(engine_args: dict) -> int | None:
    """The sequences a ``vllm serve`` with these engine arguments decodes at once (its max_num_seqs): the
    recipe's, else its default here, doubled for performance_mode throughput, capped by a max_num_batched_tokens
    the recipe sets (``EngineArgs._set_default_max_num_seqs_and_batched_tokens_args``). None: vLLM names none."""
    if (given := engine_args.get("max_num_seqs")) is not None:
        return int(given)
    _, seqs = _serve_defaults(engine_args)
    if not seqs:
        return None
    if engine_args.get("performance_mode") == "throughput":
        seqs *= 2
    if (tokens := engine_args.get("max_num_batched_tokens")) is not None:
        seqs = min(seqs, int(tokens))
    return int(seqs)


def serve_engine_limits(engine_args: dict, max_model_len: int) -> dict[str, int]:
    """max_num_batched_tokens and max_num_seqs as ``vllm serve`` derives them from these engine arguments
    (``EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`` with the OpenAI server's defaults instead of
    ``LLM``'s): the recipe's own values kept, each unset one the server's default, doubled for performance_mode
    throughput, the tokens raised to max_model_len without chunked prefill and capped at max_num_seqs x max_model_len.
    For an engine that must batch as the server does whatever the recipe sets (``serve_batch_limits`` instead leaves
    vLLM's own derivation alone where the recipe sets any, for the compile cache's sake). Empty where vLLM names no
    default for an unset one."""
    given_tokens, given_seqs = engine_args.get("max_num_batched_tokens"), engine_args.get("max_num_seqs")
    tokens_default, seqs_default = _serve_defaults(engine_args)
    if (given_tokens is None and not tokens_default) or (given_seqs is None and not seqs_default):
        return {}
    tokens = int(given_tokens) if given_tokens is not None else int(tokens_default)
    seqs = int(given_seqs) if given_seqs is not None else int(seqs_default)
    if engine_args.get("performance_mode") == "throughput":
        tokens *= 2 if given_tokens is None else 1
        seqs *= 2 if given_seqs is None else 1
    if given_tokens is None:
        if engine_args.get("enable_chunked_prefill") is False:
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    if given_seqs is None:
        seqs = min(seqs, tokens)
    return {"max_num_batched_tokens": tokens, "max_num_seqs": seqs}
