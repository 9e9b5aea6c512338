"""How many GPUs one vLLM engine takes, from its engine arguments (no engine imported: the parent plans with it)."""

from __future__ import annotations

def parallel_size(engine_args: dict, data_parallel: bool = False) -> int:
    """GPUs one vLLM engine takes: tensor_parallel_size x pipeline_parallel_size (each 1 when not given), x
    data_parallel_size with ``data_parallel`` (the GPUs a data-parallel server actually drives; the DAG and the
    cost figures count one replica)."""
    def size(name: str) -> int:
        try:
            return max(1, int(engine_args.get(name, 1) or 1))
        except (TypeError, ValueError):
            return 1
    n = size("tensor_parallel_size") * size("pipeline_parallel_size")
    return n * size("data_parallel_size") if data_parallel else n
