"""IQN as one rank runs it: DQN's replay memory, schedule and minibatch stream (`hvd_dqn.agent.dqn.agent`), with
an implicit quantile network (`network`) and its learner (`learner.ImplicitQuantileLearner`). It acts greedily on
the mean of Z at --num_quantile_samples evenly spaced levels: a deterministic policy, so runs, evaluations and the
exported SavedModel repeat (Dopamine samples those levels at random at every action)."""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.dqn.agent import DQNAgent
from hvd_dqn.agent.interface import ServedDistribution
from hvd_dqn.agent.iqn.learner import ImplicitQuantileLearner
from hvd_dqn.agent.iqn.network import build_implicit_quantile_network, mean_at_levels, quantiles_at_levels
from hvd_dqn.agent.qrdqn.learner import quantile_midpoints
from hvd_dqn.config import TrainConfig


class IQNAgent(DQNAgent):
    """A rank's IQN. Everything but the network and the update is DQN's: replay (uniform or prioritised, n-step),
    the replay ratio, the target network's copies, acting ahead, drawing ahead, exact resume, --elastic."""

    learner_class = ImplicitQuantileLearner

    @staticmethod
    def network(config: TrainConfig, spec, name: str) -> tf.keras.Model:
        network = build_implicit_quantile_network(config, spec, name, config.quantile_embedding_dim)
        network.greedy_levels = quantile_midpoints(config.num_quantile_samples)  # for `q_values`
        return network

    @staticmethod
    def q_values(network: tf.keras.Model) -> tf.keras.Model:
        return mean_at_levels(network, network.greedy_levels)

    @staticmethod
    def served_distribution(config: TrainConfig, network: tf.keras.Model) -> ServedDistribution:
        """The quantile function at the --num_quantile_samples levels greedy acting averages (B, actions, K)."""
        levels = network.greedy_levels
        return ServedDistribution(
            model=quantiles_at_levels(network, levels), output="quantiles",
            description=f"float32 (B, num_actions, {len(levels)}): each action's return at the levels in "
                        "points.levels",
            points={"levels": [float(level) for level in levels]},
            settings={"num_quantile_samples": config.num_quantile_samples,
                      "quantile_embedding_dim": config.quantile_embedding_dim})
