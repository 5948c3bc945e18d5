"""`mtkit info` (in progress)."""
