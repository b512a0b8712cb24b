"""hvd_dqn."""
