"""IQN's own checks of a config (its registry entry's `checks`)."""
from __future__ import annotations

from hvd_dqn.config import ConfigError, TrainConfig


def check_settings(config: TrainConfig) -> None:
    """At least one sample of each kind, one cosine and a positive loss threshold."""
    for name in ("num_tau_samples", "num_tau_prime_samples", "num_quantile_samples", "quantile_embedding_dim"):
        value = getattr(config, name)
        if not (isinstance(value, int) and value >= 1):
            raise ConfigError(f"--{name}={value}: must be a positive integer (Dopamine's IQN: N = N' = 64, K = 32, "
                              "an embedding of 64 cosines)")
    if not config.kappa > 0.0:
        raise ConfigError(f"--kappa={config.kappa}: must be a number > 0 (the quantile Huber loss's threshold, in "
                          "return units; Dopamine's IQN uses 1)")
