"""What one HumanEval-style check costs in the sandbox's process mode when it runs as a stage runs it: under the
stage's supervisor (procs.supervised), N checks of a passing program, timed. PYTHONPATH names the `suite` to measure;
run it from a folder that holds no other checkout (`python -m` looks in the working folder first):
  cd /tmp && PYTHONPATH=CHECKOUT CHECKOUT/.venv/bin/python CHECKOUT/studies/2026-12-07-verdict-in-minutes/scripts/check_cost.py [N]"""

import os
import subprocess
import sys

CHECKS = """
import os, sys, time
from suite.stages.evaluate import sandbox
os.environ[sandbox.ALLOW_ENV] = "1"
src = "def add(a, b):\\n    return a + b\\n"
tests = "def check(candidate):\\n    assert candidate(2, 3) == 5\\n\\ncheck(add)\\n"
n = int(sys.argv[1])
t = time.monotonic()
for _ in range(n):
    out = sandbox.run_program(src, tests, mode="process")
    assert out.passed, out
print(f"{n} checks, {(time.monotonic() - t) / n:.3f} s each")
"""

if __name__ == "__main__":
    from suite.runtime import procs

    n = sys.argv[1] if len(sys.argv) > 1 else "20"
    p = procs.supervised([sys.executable, "-c", CHECKS, n], stdout=subprocess.PIPE, env=dict(os.environ))  # stderr too: into stdout
    print(p.communicate(timeout=600)[0].decode().strip().splitlines()[-1], f"(load {os.getloadavg()[0]:.2f})")
