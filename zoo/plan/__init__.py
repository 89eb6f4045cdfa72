"""Memory planning: what one device holds in a training step of a zoo model, by part (weights,
gradients, optimizer state, activations, logits and loss, buffers), under a precision and a
data-parallel strategy, and the largest micro-batch that fits a device. `zoo-plan` prints it."""
