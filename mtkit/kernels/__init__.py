"""CPU kernels the model calls: oneDNN's fp32 linear (plain or with a packed weight), the two attention paths,
and the dropout mask. Functions of their arguments only: no module-level state, no timings, no choices made by
measuring (those are mtkit.runtime's, made once by an entry point and handed down as attributes of modules).

Layers (each imports only from its own layer or below):

    mtkit.train > mtkit.decode > mtkit.runtime > mtkit.checkpoint > mtkit.model > mtkit.kernels > mtkit.data > base
"""
