"""Compare isa_probe.py outputs with the first: bit-identical rows, the largest |difference| of a log probability over
the vocabulary and over the answer letters ' A'..' D', and whether the letters' order changed.

usage: compare_isa.py REF.npy OTHER.npy ..."""
import sys

import numpy as np
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[0].rsplit("/studies/", 1)[0] + "/models/smollm2-135m-instruct"
                                    if "/studies/" in sys.argv[0] else "../../models/smollm2-135m-instruct")
letters = [tok.encode(" " + c)[0] for c in "ABCD"]
ref = np.load(sys.argv[1])
print(f"reference: {sys.argv[1]}")
print("| run | identical rows | max abs diff (vocabulary) | max abs diff (A-D) | letter order changed |")
print("|---|---|---|---|---|")
for path in sys.argv[1:]:
    x = np.load(path)
    same = int(sum(np.array_equal(a, b) for a, b in zip(ref, x)))
    order = int(sum((np.argsort(-a[letters]) != np.argsort(-b[letters])).any() for a, b in zip(ref, x)))
    print(f"| {path.rsplit('/', 1)[-1]} | {same}/{len(ref)} | {np.abs(ref - x).max():.3g} | "
          f"{np.abs(ref[:, letters] - x[:, letters]).max():.3g} | {order}/{len(ref)} |")
