"""The quantize stage (llmcompressor, quantize environment) and the layer-sensitivity sweep that runs there too."""
