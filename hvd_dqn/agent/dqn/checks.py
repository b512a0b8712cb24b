"""The checks of DQN's own settings that the agents built on its Q-networks share (its registry entry's `checks`)."""
from __future__ import annotations

from hvd_dqn.config import ConfigError, TrainConfig


def check_settings(config: TrainConfig) -> None:
    check_noisy_nets(config)


def check_noisy_nets(config: TrainConfig) -> None:
    """A positive initial noise scale, and no second exploration beside the noise."""
    if not config.noisy_sigma0 > 0.0:
        raise ConfigError(f"--noisy_sigma0={config.noisy_sigma0}: must be a number > 0 (the noise's initial scale "
                          "per 1/sqrt(fan-in); Fortunato et al.'s 0.5, Dopamine's 0.1)")
    if config.noisy_nets and config.apex_exploration:
        raise ConfigError("--noisy_nets with --apex_exploration: noisy networks explore by their noise, with "
                          "epsilon 0, so Ape-X's per-env epsilons would have nothing to set. Use one of them")
