"""What a run shows as it trains: throughput, step-counting progress bars, a sample of generated
text, the routing of a mixture of experts, instabilities, and downstream task scores."""
