"""Fixtures the faults share with other folders: `toy_data` (tests/train/conftest.py) for the training faults."""

from tests.train.conftest import toy_data  # noqa: F401  (a fixture, registered by being here)
