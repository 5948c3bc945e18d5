"""Training (paper section 5): schedule, loss, and the training loop."""
