"""What a run shows as it trains: throughput, step-counting progress bars, a sample of generated
text, a unigram baseline, and the check that the last step was validated."""
