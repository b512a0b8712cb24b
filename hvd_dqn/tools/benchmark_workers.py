"""Moved to hvd_dqn.measure.benchmark_workers (this name is kept for version 0.3 only)."""
from hvd_dqn.tools import moved; moved(__name__, "hvd_dqn.measure.benchmark_workers")  # noqa: E702
