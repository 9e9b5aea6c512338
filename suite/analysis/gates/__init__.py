"""The release gates, one module each, registered in ``gates.registry.GATES`` (the order below is the order of the
checks; a plug-in's, found by entry point, come after); ``suite.analysis.gate.run`` iterates them."""

from suite.analysis.gates import (  # noqa: F401 - importing a gate module registers it
    drop, relative_drop, noninferiority, recovery, throughput, goodput, sustainable_rate, latency, kv_layers,
    perplexity_increase, sequential,
)
