"""Stage process entry: ``python -m suite.stages <stage> <config.json> <result.json>``.

Each stage runs in a process of its own (GPU memory is only truly freed when a process ends, and the
quantize stage lives in a different environment). The parent never imports vLLM, lm-eval or torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

STAGES = {
    "quantize": ("suite.quantize", "QuantizeConfig"),
    "evaluate": ("suite.evaluate", "EvaluateConfig"),
    "benchmark": ("suite.benchmark", "BenchmarkConfig"),
    "sensitivity": ("suite.sensitivity", "SensitivityConfig"),
}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in STAGES:
        print(f"usage: python -m suite.stages {{{','.join(STAGES)}}} CONFIG.json RESULT.json", file=sys.stderr)
        return 2
    import importlib

    from suite import results

    stage, cfg_path, out_path = argv
    module_name, config_cls = STAGES[stage]
    config = getattr(results, config_cls).read(Path(cfg_path))
    result = importlib.import_module(module_name).run(config)
    from suite.procs import result_allowed

    if refused := result_allowed():  # an orphan of a lost run must not overwrite a result accepted since
        print(f"RuntimeError: result not written: {refused}", file=sys.stderr)
        return 3
    result.write(Path(out_path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
