"""QR-DQN's own checks of a config (its registry entry's `checks`)."""
from __future__ import annotations

from hvd_dqn.agent.dqn.checks import check_noisy_nets
from hvd_dqn.config import ConfigError, TrainConfig


def check_settings(config: TrainConfig) -> None:
    """At least two quantiles (one is a point estimate: DQN) and a positive loss threshold."""
    check_noisy_nets(config)
    if not (isinstance(config.num_quantiles, int) and config.num_quantiles >= 2):
        raise ConfigError(f"--num_quantiles={config.num_quantiles}: must be an integer >= 2 (quantiles of the return "
                          "per action; Dopamine's QR-DQN uses 200)")
    if not config.kappa > 0.0:
        raise ConfigError(f"--kappa={config.kappa}: must be a number > 0 (the quantile Huber loss's threshold, in "
                          "return units; Dopamine's QR-DQN uses 1)")
