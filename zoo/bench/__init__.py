"""Benchmarks (`zoo-bench`): training throughput, forward latency, generation speed, peak memory
and model FLOPs utilisation of a zoo model, side by side with the same model in the peer
libraries (Hugging Face transformers, x-transformers), measured in one process in interleaved
rounds and reported as medians. Figures, not tests: nothing here asserts a time."""
