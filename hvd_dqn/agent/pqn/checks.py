"""PQN's own checks of a config (its registry entry's `checks`), after the settings of other agents are refused."""
from __future__ import annotations

from hvd_dqn.config import ConfigError, TrainConfig


def check_settings(config: TrainConfig) -> None:
    """Acting runs in order, nothing is drawn from a replay memory, and whole minibatches need a fixed job."""
    if config.pipeline == "on":
        raise ConfigError("--pipeline=on: with --agent=pqn acting runs in order (each rollout is collected with the "
                          "weights it is learned from); leave it at auto")
    if config.draw_ahead == "on":
        raise ConfigError("--draw_ahead=on: a DQN setting (minibatches drawn from the replay memory); --agent=pqn "
                          "learns from each rollout. Leave it at auto")
    # whole minibatches of one rank's size at a fixed job size: with each rank's counts its own, a rank's
    # minibatches are already whole (and an elastic world's N changes while the split is in use)
    if config.pqn_minibatches == "whole" and (config.counts_per_rank or config.elastic):
        raise ConfigError("--pqn_minibatches=whole: splits the job's rollout into whole minibatches per rank at a "
                          "fixed number of ranks; with --counts_per_rank or --elastic each rank already makes "
                          "--num_minibatches whole minibatches of its own rollout. Leave it at shared")
