"""Moved to hvd_dqn.plan.cost_model (this name is kept for version 0.3 only)."""
from hvd_dqn.tools import moved; moved(__name__, "hvd_dqn.plan.cost_model")  # noqa: E702
