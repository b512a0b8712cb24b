"""C51 as one rank runs it: DQN's replay memory, schedule and minibatch stream (`hvd_dqn.agent.dqn.agent`), with a
network of logits over the return's atoms and the categorical learner (`learner.CategoricalLearner`). It acts
greedily on each action's expected return. With 3-step returns and prioritised replay it is Dopamine's Rainbow;
with --noisy_nets, --dueling and --double_dqn too, Hessel et al.'s full Rainbow."""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.c51.learner import CategoricalLearner, expected_values, support_of
from hvd_dqn.agent.dqn.agent import DQNAgent, noise_off
from hvd_dqn.agent.interface import ServedDistribution
from hvd_dqn.agent.networks import Head, q_network_for
from hvd_dqn.config import TrainConfig


class C51Agent(DQNAgent):
    """A rank's C51. Everything but the network and the update is DQN's: replay (uniform or prioritised, n-step),
    the replay ratio, the target network's copies, acting ahead, drawing ahead, exact resume, --elastic."""

    learner_class = CategoricalLearner

    @staticmethod
    def network(config: TrainConfig, spec, name: str) -> tf.keras.Model:
        """The Q-network of the config with --num_atoms logits per action, (B, actions, atoms), every kernel
        initialised as Dopamine's RainbowNetwork does; it carries its support for `q_values_of`."""
        network = q_network_for(config, spec, name, Head(atoms=config.num_atoms, initializer="dopamine_fan_in"))
        network.support = support_of(config)
        return network

    @staticmethod
    def q_values_of(model: tf.keras.Model, network: tf.keras.Model) -> tf.keras.Model:
        """Q(s, a), the expected return of each action's distribution, as a model of `model`'s inputs."""
        expectation = tf.keras.layers.Lambda(lambda logits: expected_values(logits, network.support), name="q_values",
                                             dtype="float32")
        return tf.keras.Model(model.inputs, expectation(model.outputs[0]), name=f"{network.name}_q_values")

    @staticmethod
    def served_distribution(config: TrainConfig, network: tf.keras.Model) -> ServedDistribution:
        """Each action's probabilities of the --num_atoms atoms (B, actions, atoms), the softmax of its logits."""
        model = noise_off(network)
        softmax = tf.keras.layers.Lambda(lambda logits: tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1),
                                         name="probabilities", dtype="float32")
        return ServedDistribution(
            model=tf.keras.Model(model.inputs, softmax(model.outputs[0]), name=f"{network.name}_probabilities"),
            output="probabilities",
            description=f"float32 (B, num_actions, {config.num_atoms}): each action's probability of the returns "
                        "in points.support",
            points={"support": [float(atom) for atom in network.support]},
            settings={"num_atoms": config.num_atoms, "v_min": float(network.support[0]),
                      "v_max": float(network.support[-1])})
