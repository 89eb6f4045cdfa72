"""Console entry points (thin @hydra.main wrappers)."""
