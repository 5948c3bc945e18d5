"""CPU kernels the model calls: oneDNN's fp32 linear (plain or with a packed weight), the two attention paths,
and the dropout mask. Functions of their arguments only: no module-level state, no timings, no choices made by
measuring (those are mtkit.runtime's, made once by an entry point and handed down as attributes of modules).

Where this package sits among mtkit's layers (what it may import): docs/architecture.md, whose table is generated
from pyproject.toml's import-linter contract.
"""
