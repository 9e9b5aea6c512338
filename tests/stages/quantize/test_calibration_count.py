"""The quantize stage's calibration counter (count_passes): hooks on the decoder layers count sample-layer passes,
each layer at most once per sample, as llmcompressor's sequential pipeline runs it (every layer twice per sample:
"Calibrating", then "Propagating" its outputs to the next layer)."""

from __future__ import annotations

import json

import torch

from suite.runtime import progress
from suite.stages.quantize.stage import count_passes


class Toy(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(n))


def test_each_layer_counts_each_sample_once_over_the_calibrate_and_propagate_passes(tmp_path, monkeypatch):
    path = tmp_path / "quantize.progress.json"
    monkeypatch.setenv(progress.ENV, str(path))
    monkeypatch.setattr(progress, "MIN_INTERVAL_S", 0.0)
    model, samples = Toy(3), 2
    hooks = count_passes(model, samples)
    seen = []
    with torch.no_grad():
        for layer in model.layers:  # the sequential pipeline: one layer (subgraph) at a time
            for _pass in ("calibrating", "propagating"):
                for _ in range(samples):
                    layer(torch.zeros(1, 4, 8))
            seen.append(json.loads(path.read_text()))
    for h in hooks:
        h.remove()
    assert seen[0]["what"] == "calibration passes (2 samples x 3 layers)"
    assert [(s["done"], s["total"]) for s in seen] == [(2, 6), (4, 6), (6, 6)]  # not 4/6 after the first layer
