"""The matmul under the engine, alone: a BF16 linear layer of SmolLM2-135M's shape (576 -> 1536, 300 tokens) on fixed
random inputs, its output's sha256 printed with torch's thread count and CPU capability. Run it under different
OMP_NUM_THREADS / ONEDNN_MAX_CPU_ISA / competing load and compare the hashes (same hash: bit-identical output)."""
import hashlib
import os
import subprocess

import torch

g = torch.Generator().manual_seed(0)
x = torch.randn(300, 576, generator=g).to(torch.bfloat16)
w = torch.randn(1536, 576, generator=g).to(torch.bfloat16) / 24
outs = {hashlib.sha256(torch.nn.functional.linear(x, w).float().numpy().tobytes()).hexdigest()[:12] for _ in range(20)}
load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.split("load average:")[1].split(",")[0]
print(f"threads={torch.get_num_threads()} capability={torch.backends.cpu.get_cpu_capability()} "
      f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '-')} load={load.strip()} hashes(20 calls)={sorted(outs)}")
