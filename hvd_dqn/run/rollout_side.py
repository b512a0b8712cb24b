"""The learning side of a PQN rank (--agent=pqn): its rollout and the updates a full rollout pays for.

`store(experience)` adds one step of the rank's envs to the rollout; `learn()` does nothing until the rollout
holds --rollout_steps steps, then computes its Q(lambda) returns (`hvd_dqn.agent.pqn.q_lambda_returns`, with
bootstrap values from the network as it is before the rollout's updates, the network that collected it) and
makes --update_epochs passes over it in --num_minibatches shuffled minibatches, each a collective update whose
gradient Horovod averages over the ranks; then the next rollout begins. Every rank's rollout fills at the same
iteration, so all ranks enter the same updates. It stands where `hvd_dqn.run.learning_side.LearningSide`
stands for DQN and offers the trainer and the checkpoints the same names.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from hvd_dqn.agent.policy import store_step
from hvd_dqn.agent.pqn import PQNLearner, q_lambda_returns
from hvd_dqn.config import TrainConfig
from hvd_dqn.replay.rollout import Rollout
from hvd_dqn.run.acting_side import Experience
from hvd_dqn.run.metrics import RankMetrics


class RolloutSide:
    def __init__(self, config: TrainConfig, learner: PQNLearner, rollout: Rollout, sample_rng: np.random.Generator,
                 rank_metrics: RankMetrics, minibatch_size: int, network_changed: Callable[[], None] = lambda: None):
        self.config = config
        self.learner = learner
        self.replay = rollout  # the trainer and the checkpoints call a rank's memory `replay`
        self.sample_rng = sample_rng  # the minibatches' shuffles (checkpointed)
        self.rank_metrics = rank_metrics
        self.minibatch_size = minibatch_size  # this rank's share of every minibatch
        self.update_credit = 0  # what a DQN rank checkpoints of its replay ratio; a rollout has none
        self.ranks_sharing_an_update = 1
        self.network_changed = network_changed  # the actor's: after updates its NumPy copy is taken again

    def share_updates_over(self, world_size: int) -> None:
        """At start-up and after every change of world (--elastic). A rank's share of each minibatch is a
        fixed part of its own rollout, so nothing is re-split; but a change of world starts a new rollout on
        every rank: the survivors' networks were rolled back past the steps they had collected since the last
        commit, and a newcomer's rollout is empty, so only new rollouts fill in step on every rank."""
        self.replay.clear()
        self.network_changed()  # the actor copies the weights at its next greedy action: after the rollback and
        # Horovod Elastic's sync of rank 0's weights, which both come before training goes on

    def store(self, experience: Experience):
        """Stores one step of every env, as the DQN side does; returns (raw rewards, done)."""
        _, reward, done = store_step(self.replay, experience.observation, experience.action, experience.step_result,
                                     self.config.clip_rewards, self.config.terminal_on_life_loss)
        return reward, done

    def learn(self, env_steps: int, counters) -> None:
        """Collective once the rollout is full: the returns, then every minibatch update of every pass."""
        rollout, config = self.replay, self.config
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
        self.network_changed()

    def close(self) -> None:
        pass
