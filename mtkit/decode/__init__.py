"""Decoding: batched beam search (beam.py) and text-in, text-out translation (translator.py)."""
