"""Building blocks: attention, feed-forward, norms, blocks, position schemes (pure torch)."""
