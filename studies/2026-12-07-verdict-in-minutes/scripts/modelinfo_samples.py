"""How long each evaluation's engine start spent in vLLM's model-class inspection subprocess.

Reads a run's (or results folder's) evaluate stack profiles (the stage's sampled stacks, every 0.1 s) and counts the
samples inside ``vllm/model_executor/models/registry.py:_run_in_subprocess``: vLLM runs it when
``$VLLM_CACHE_ROOT/modelinfos`` lacks the model class's facts.
    python scripts/modelinfo_samples.py results/cpu-demo-20261207
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def main(folder: str) -> None:
    for stacks in sorted(Path(folder).glob("*.evaluate.stacks.json.gz")):
        variant = stacks.name.split(".evaluate.")[0]
        s = json.loads(gzip.decompress(stacks.read_bytes()))
        frames, table = s["frames"], s["stacks"]
        inside = sum(1 for _, i in s["samples"] if any(frames[j].endswith(":_run_in_subprocess") for j in table[i]))
        result = json.loads((stacks.parent / f"{variant}.evaluate.result.json").read_text())
        start = result["engine_start"]
        print(f"{variant}: engine start {start['total_s']:.1f} s ({start['compile_cache']}), "
              f"{inside * s['interval_s']:.1f} s of samples in the model-class subprocess, "
              f"evaluation {result['wall_s']:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1])
