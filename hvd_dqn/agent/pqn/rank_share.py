"""How PQN's rollout divides over N ranks (hvd_dqn.rank_split asks it through `PQNSettings`): each rank's envs, its
part of every update, and the updates each rollout makes. PQN's minibatches are a --num_minibatches-th of the job's
rollout (--rollout_steps x the job's envs), shared over the ranks or made whole by each (--pqn_minibatches)."""
from __future__ import annotations

from hvd_dqn.config import ConfigError, TrainConfig
from hvd_dqn.rank_split import rank_envs as split_envs


def rank_envs(config: TrainConfig, world_size: int) -> int:
    """One rank's envs. Each minibatch is a --num_minibatches-th of the job's rollout, drawn in equal shares from the
    ranks' rollouts, so N ranks run one rank's algorithm: the envs and each minibatch must split evenly over them."""
    envs = split_envs(config, world_size)
    rollout = config.rollout_steps * envs
    if rollout % config.num_minibatches:
        raise ConfigError(f"--num_minibatches={config.num_minibatches}: each rank's rollout of {rollout:,} transitions "
                          f"(--rollout_steps={config.rollout_steps} x {envs} envs) must split into that many equal "
                          "minibatches")
    return envs


def minibatch_size(config: TrainConfig, world_size: int) -> int:
    """The transitions of a rank's part of each update: its share of every minibatch (shared), or one rank's whole
    minibatch, a --num_minibatches-th of the job's rollout (whole: --num_minibatches / N of them per pass from each
    rank's rollout, which must split so)."""
    envs = rank_envs(config, world_size)
    if config.pqn_minibatches == "shared":
        return config.rollout_steps * envs // config.num_minibatches
    if config.num_minibatches % world_size:
        raise ConfigError(f"--pqn_minibatches=whole: --num_minibatches={config.num_minibatches} whole minibatches "
                          f"per pass must split evenly over the {world_size} ranks (or leave --pqn_minibatches at "
                          "shared)")
    return config.rollout_steps * envs * world_size // config.num_minibatches


def updates_per_rollout(config: TrainConfig, world_size: int) -> int:
    """The updates each rollout makes, --update_epochs passes over a rank's rollout in parts of `minibatch_size`:
    --num_minibatches per pass (shared) or --num_minibatches / N (whole)."""
    rank_rollout = config.rollout_steps * rank_envs(config, world_size)
    return config.update_epochs * (rank_rollout // minibatch_size(config, world_size))
