"""PQN as one rank runs it (--agent=pqn): its rollout, its learner, and the updates each full rollout makes due.

`store(experience)` adds one step of the rank's envs to the rollout; `learn()` does nothing until the rollout
holds --rollout_steps steps, then computes its Q(lambda) returns (`q_lambda_returns`, with bootstrap values from
the network as it is before the rollout's updates, the network that collected it) and makes --update_epochs
passes over it in --num_minibatches shuffled minibatches, each a collective update whose gradient Horovod
averages over the ranks (--pqn_minibatches: each rank's share of every minibatch, or whole minibatches of its
own rollout, N times fewer); then the next rollout begins. Every rank's rollout fills at the same iteration, so all
ranks enter the same updates.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from hvd_dqn.agent.base import AgentBase
from hvd_dqn.agent.interface import MemorySetting
from hvd_dqn.agent.networks import q_network_for
from hvd_dqn.agent.policy import RolloutActor
from hvd_dqn.agent.pqn.learner import PQNLearner, q_lambda_returns
from hvd_dqn.config import TrainConfig
from hvd_dqn.agent.pqn.rank_share import minibatch_size, updates_per_rollout
from hvd_dqn.memories.rollout import Rollout


class PQNAgent(AgentBase):
    """A rank's PQN: the rollout, the learner (no target network), the minibatch shuffles (their own RNG,
    checkpointed) and the actor, whose NumPy copy of the weights is taken again after every round of updates.

    `rank_metrics` records each update's loss and Q values (`hvd_dqn.run.metrics.RankMetrics`)."""

    memory_name = "rollout"
    learner_class = PQNLearner

    def __init__(self, config: TrainConfig, learner: PQNLearner, rollout: Rollout, spec, world_size: int,
                 sample_rng: np.random.Generator, rank_metrics):
        super().__init__(config, learner, rollout, spec, sample_rng, rank_metrics)
        self.minibatch_size = minibatch_size(config, world_size)  # this rank's part of every update
        self.updates_per_rollout = updates_per_rollout(config, world_size)
        self.iterations_per_cycle = config.rollout_steps  # it learns once a rollout
        self.actor: Optional[RolloutActor] = None  # `make_actor`'s

    @classmethod
    def build(cls, config: TrainConfig, spec, num_envs: int, replay_capacity: int, world_size: int,
              sample_rng: np.random.Generator, rank_metrics) -> "PQNAgent":
        """A rank's PQN for `num_envs` envs of `spec` (it keeps no replay memory: `replay_capacity` is unused)."""
        learner = cls.learner_class.from_config(config, cls.network(config, spec, "online"), world_size)
        rollout = Rollout(config.rollout_steps, num_envs, spec.observation_shape, spec.observation_dtype)
        return cls(config, learner, rollout, spec, world_size, sample_rng, rank_metrics)

    # --- what the class answers (hvd_dqn.agent.interface.AgentClass) ---------------------------------------------
    @staticmethod
    def network(config: TrainConfig, spec, name: str):
        return q_network_for(config, spec, name)

    @staticmethod
    def q_values(network):
        return network

    @staticmethod
    def memory_bytes(config: TrainConfig, spec, num_envs: int, capacity: int) -> int:
        return rollout_bytes(config, spec, num_envs)

    @staticmethod
    def memory_setting(config: TrainConfig, ranks_on_host: int) -> MemorySetting:
        return MemorySetting(f"--rollout_steps={config.rollout_steps}", "rollout", "the rollouts",
                             ["fewer ranks per host", "fewer --num_envs", "fewer --rollout_steps"])

    # --- acting -----------------------------------------------------------------------------------------------
    def make_actor(self, rng: np.random.Generator, own_network: bool = False) -> RolloutActor:
        """Acting in order with the online network, from a copy taken once a rollout; PQN never acts ahead
        (each rollout is collected with the weights it is learned from)."""
        if own_network:
            raise ValueError("PQN acts in order: each rollout is collected with the weights it is learned from")
        self.actor = RolloutActor(self.online, self.spec.num_actions, rng)
        return self.actor

    def iterations_per_update(self, num_envs: int) -> float:
        return self.config.rollout_steps / self.updates_per_rollout

    # --- the world ---------------------------------------------------------------------------------------------
    def join_world(self, world_size: int) -> None:
        """At start-up and after every change of world (--elastic). A rank's share of each minibatch is a
        fixed part of its own rollout, so nothing is re-split; but a change of world starts a new rollout on
        every rank: the survivors' networks were rolled back past the steps they had collected since the last
        commit, and a newcomer's rollout is empty, so only new rollouts fill in step on every rank."""
        self.memory.clear()
        self._network_changed()  # the actor copies the weights at its next greedy action: after the rollback
        # and Horovod Elastic's sync of rank 0's weights, which both come before training goes on

    def on_world_change(self, world_size: int) -> bool:
        """PQN's step size does not follow the ranks: each rank's minibatch share is its own under --elastic."""
        return False

    def rank_state(self) -> Dict[str, int]:
        return {}  # a rollout owes no updates: the rank's RNGs (saved by the loop) are all it keeps

    def load_rank_state(self, state: Optional[Dict[str, int]]) -> None:
        pass

    # --- learning --------------------------------------------------------------------------------------
    def learn(self, env_steps: int, counters) -> None:
        """Collective once the rollout is full: the returns, then every minibatch update of every pass."""
        rollout, config = self.memory, self.config
        if not rollout.full:
            return
        next_value = self.learner.max_q(rollout.next_observations)
        returns = q_lambda_returns(rollout.rewards, rollout.discounts, rollout.ended, next_value, config.gamma,
                                   config.q_lambda)
        observations = rollout.observations.reshape((-1,) + rollout.observations.shape[2:])
        actions, targets = rollout.actions.reshape(-1), returns.reshape(-1)
        for _ in range(config.update_epochs):
            order = self.sample_rng.permutation(len(targets))
            for start in range(0, len(order), self.minibatch_size):
                chosen = order[start:start + self.minibatch_size]
                self.rank_metrics.record_update(self.learner.update(observations[chosen], actions[chosen],
                                                                    targets[chosen]))
                counters.updates += 1
        rollout.clear()
        self._network_changed()

    def _network_changed(self) -> None:
        if self.actor is not None:
            self.actor.network_changed()



def rollout_bytes(config: TrainConfig, spec, num_envs: int) -> int:
    """Bytes a rank's rollout of --rollout_steps steps of `num_envs` envs will hold once allocated."""
    # A one-step rollout gives the bytes per transition; the arrays grow linearly with the steps.
    probe = Rollout(1, num_envs, spec.observation_shape, spec.observation_dtype)
    return probe.bytes_per_transition * config.rollout_steps * num_envs
