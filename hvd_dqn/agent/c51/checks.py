"""C51's own checks of a config (its registry entry's `checks`)."""
from __future__ import annotations

from hvd_dqn.agent.dqn.checks import check_noisy_nets
from hvd_dqn.config import ConfigError, TrainConfig


def check_settings(config: TrainConfig) -> None:
    """At least two atoms on a support that is an interval: v_max above v_min."""
    check_noisy_nets(config)
    if not (isinstance(config.num_atoms, int) and config.num_atoms >= 2):
        raise ConfigError(f"--num_atoms={config.num_atoms}: must be an integer >= 2 (atoms of the return's "
                          "distribution; C51 and Dopamine's Rainbow use 51)")
    v_min = -config.v_max if config.v_min is None else config.v_min
    if not config.v_max > v_min:
        shown = f"--v_min={config.v_min}" if config.v_min is not None else f"--v_min unset (so -v_max = {v_min})"
        raise ConfigError(f"--v_max={config.v_max} with {shown}: v_max must be above v_min (the support of the "
                          "return's distribution runs from v_min to v_max; Dopamine's Atari presets use -10 to 10)")
