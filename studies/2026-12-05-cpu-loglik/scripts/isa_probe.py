"""The demo model end to end in torch (transformers, BF16, the same oneDNN matmuls vLLM's CPU path calls): the log
probabilities of 8 fixed texts, written to OUT.npy, with torch's thread count and oneDNN's ISA cap printed. Run it
with and without ONEDNN_MAX_CPU_ISA and compare the files (compare_isa in the README's commands).

usage: isa_probe.py OUT.npy"""
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
model_dir = os.path.join(root, "models", "smollm2-135m-instruct")
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16).eval()
texts = [f"Question {i}: which of the following is a prime number? A. {4 * i} B. {4 * i + 1} C. {4 * i + 2} "
         f"D. {4 * i + 3}\nAnswer:" for i in range(8)]
with torch.no_grad():  # one text at a time (no padding): the answer token's distribution
    logp = torch.stack([torch.log_softmax(model(tok(t, return_tensors="pt").input_ids).logits.float()[0, -1], -1)
                        for t in texts])
np.save(sys.argv[1], logp.numpy())
print(f"threads={torch.get_num_threads()} ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '-')} "
      f"written {sys.argv[1]} {tuple(logp.shape)}")
