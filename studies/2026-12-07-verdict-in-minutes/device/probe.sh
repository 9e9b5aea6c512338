#!/usr/bin/env bash
# Import-time probe: vLLM's API server and engine-core imports with and without bytecode (.pyc) on the GPU image,
# whose environment sets PYTHONDONTWRITEBYTECODE=1 and whose torch ships no __pycache__. B's bytecode lives under
# PYTHONPYCACHEPREFIX=/tmp/pyc, so A (none) and B can alternate.
set -uo pipefail
t0=$(date +%s)
while [ ! -f /tmp/envs/.complete ] && [ $(( $(date +%s) - t0 )) -lt 240 ]; do sleep 2; done
[ -f /tmp/envs/.complete ] || { echo "install not done"; tail -3 /tmp/install.log; exit 2; }
echo "install done (waited $(( $(date +%s) - t0 )) s)"
export PYTHONPATH=/tmp/envs/serve
td=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")
mods="import vllm.entrypoints.openai.api_server, vllm.v1.engine.core"
find "$td" /tmp/envs/serve -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
s=$(date +%s); PYTHONPYCACHEPREFIX=/tmp/pyc python3 -m compileall -q -j 0 "$td" /tmp/envs/serve >/dev/null 2>&1
echo "compileall torch + serve env into /tmp/pyc: rc $?, $(( $(date +%s) - s )) s, $(du -sh /tmp/pyc | cut -f1)"
for i in 1 2 3; do
  /usr/bin/time -f "  A (no bytecode) import %e s" python3 -c "$mods" 2>&1 | grep "import "
  PYTHONPYCACHEPREFIX=/tmp/pyc /usr/bin/time -f "  B (bytecode) import %e s" python3 -c "$mods" 2>&1 | grep "import "
done
PYTHONPYCACHEPREFIX=/tmp/pyc python3 -X importtime -c "$mods" 2>&1 | sort -t'|' -k2 -n | tail -6
