"""QR-DQN as one rank runs it: DQN's replay memory, schedule and minibatch stream (`hvd_dqn.agent.dqn.agent`), with
a network of quantiles and the quantile learner (`learner.QuantileLearner`). It acts greedily on the mean of each
action's quantiles."""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.dqn.agent import DQNAgent, noise_off
from hvd_dqn.agent.interface import ServedDistribution
from hvd_dqn.agent.networks import Head, q_network_for
from hvd_dqn.agent.qrdqn.learner import QuantileLearner, quantile_midpoints
from hvd_dqn.config import TrainConfig


class QRDQNAgent(DQNAgent):
    """A rank's QR-DQN. Everything but the network and the update is DQN's: replay (uniform or prioritised, n-step),
    the replay ratio, the target network's copies, acting ahead, drawing ahead, exact resume, --elastic."""

    learner_class = QuantileLearner

    @staticmethod
    def network(config: TrainConfig, spec, name: str) -> tf.keras.Model:
        """The Q-network of the config with --num_quantiles outputs per action, (B, actions, N), every kernel
        initialised as Dopamine's QuantileNetwork does."""
        return q_network_for(config, spec, name, Head(atoms=config.num_quantiles, initializer="dopamine_fan_in"))

    @staticmethod
    def q_values_of(model: tf.keras.Model, network: tf.keras.Model) -> tf.keras.Model:
        """Q(s, a), the mean of the action's quantiles, as a model of `model`'s inputs sharing its weights."""
        mean = tf.keras.layers.Lambda(lambda quantiles: tf.reduce_mean(quantiles, axis=-1), name="q_values",
                                      dtype="float32")
        return tf.keras.Model(model.inputs, mean(model.outputs[0]), name=f"{network.name}_q_values")

    @staticmethod
    def served_distribution(config: TrainConfig, network: tf.keras.Model) -> ServedDistribution:
        """Each action's --num_quantiles quantiles (B, actions, N), at the levels (2i + 1) / 2N they estimate."""
        model = noise_off(network)
        levels = quantile_midpoints(config.num_quantiles)
        return ServedDistribution(
            model=model, output="quantiles",
            description=f"float32 (B, num_actions, {config.num_quantiles}): each action's return at the levels "
                        "in points.levels",
            points={"levels": [float(level) for level in levels]},
            settings={"num_quantiles": config.num_quantiles})
