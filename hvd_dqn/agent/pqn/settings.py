"""PQN's own settings (Gallici et al. 2024): its rollout, its minibatches and passes, its Q(lambda) returns."""
from __future__ import annotations

import dataclasses

from hvd_dqn.agent.dqn.settings import DuelingSettings, LayerNormSettings, TDLossSettings
from hvd_dqn.settings import RolloutSettings, in_unit_interval, one_of, positive_int, setting

# How N ranks share PQN's minibatches: every minibatch shared over the ranks (one rank's algorithm), or whole
# minibatches per rank.
PQN_MINIBATCH_MODES = ("shared", "whole")


@dataclasses.dataclass(frozen=True)
class PQNSettings(RolloutSettings, TDLossSettings, DuelingSettings, LayerNormSettings):
    """PQN's settings: its rollout, minibatches, passes and Q(lambda) returns; DQN's TD loss and Q-network shape."""

    rollout_steps: int = setting(
        128, "PQN: steps of every env in each rollout; the job's rollout is this times --num_envs (CleanRL pqn.py's "
             "num_steps: 128).", purpose="PQN's rollout", check=positive_int)
    num_minibatches: int = setting(
        4, "PQN: minibatches per pass over a rollout, each a --num_minibatches-th of the job's rollout, split evenly "
           "over the ranks.", purpose="PQN's minibatches of each rollout", check=positive_int)
    pqn_minibatches: str = setting(
        "shared", "PQN with N ranks. shared: every minibatch is a --num_minibatches-th of the job's rollout, drawn "
                  "in equal shares from the ranks, so N ranks run one rank's algorithm, each making every update on "
                  "1/N of the minibatch. whole: each rank makes --num_minibatches / N whole minibatches of one "
                  "rank's size from its own rollout per pass, so each update averages N of them (N times the "
                  "transitions) and a rollout makes N times fewer updates (fewer, larger updates: for a small "
                  "network an update costs about the same at any of these sizes); the step size is then scaled by "
                  "N and --lr_decay_updates divided by N, as under --rank_scaling=batch (--scale_lr_by_workers, "
                  "--scale_schedules_by_workers).", purpose="how its ranks share its minibatches", check=one_of(*PQN_MINIBATCH_MODES))
    update_epochs: int = setting(4, "PQN: passes over each rollout.", purpose="PQN's passes over each rollout", check=positive_int)
    q_lambda: float = setting(
        0.65, "PQN: lambda of the Q(lambda) returns (0: bootstrap after every step; 1: only at the rollout's or the "
              "episode's end).", purpose="PQN's Q(lambda) returns", check=in_unit_interval)

    def update_grows_with_ranks(self) -> bool:
        return self.pqn_minibatches == "whole"

    # How the job's rollout divides over the ranks: hvd_dqn.agent.pqn.rank_share.
    def rank_envs(self, config, world_size: int) -> int:
        from hvd_dqn.agent.pqn.rank_share import rank_envs

        return rank_envs(config, world_size)

    def env_steps_before_first_update(self, config, world_size: int) -> int:
        return self.rollout_steps * self.rank_envs(config, world_size) * world_size

    def check_world(self, config, world_size: int) -> None:
        from hvd_dqn.agent.pqn.rank_share import minibatch_size

        minibatch_size(config, world_size)
