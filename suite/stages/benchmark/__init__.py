"""The benchmark stage: ``vllm serve`` + ``vllm bench serve`` load points, the bottleneck monitor, roofline and SLO search."""
