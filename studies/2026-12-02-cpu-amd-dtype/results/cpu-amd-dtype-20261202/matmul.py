"""torch matmul on this CPU, float32 against BF16 (one 512x576 @ 576x1536 GEMM, one 1x576 GEMV)."""
import time

import torch

for dt in (torch.float32, torch.bfloat16):
    b = torch.randn(576, 1536, dtype=dt)
    for rows, n in ((512, 20), (1, 200)):
        a = torch.randn(rows, 576, dtype=dt)
        a @ b
        t = time.perf_counter()
        for _ in range(n):
            a @ b
        print(f"{dt} {rows}x576 @ 576x1536: {(time.perf_counter() - t) / n * 1000:.2f} ms")
