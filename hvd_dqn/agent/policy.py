"""Acting: epsilon-greedy action selection from the online Q-network, for a batch of environments."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.noisy import tiled_seed
from hvd_dqn.agent.numpy_forward import NumpyForward


class EpsilonGreedyActor:
    """Chooses a_t for each environment: uniformly random with probability epsilon, else argmax_a Q(s_t, a).

    `epsilon` may be a scalar or one value per environment. Random draws come from the actor's own
    generator (seeded per rank), so runs repeat for a given seed.
    """

    def __init__(self, q_network: tf.keras.Model, num_actions: int, rng: np.random.Generator):
        self._q_network = q_network
        self._num_actions = num_actions
        self.rng = rng

    @property
    def q_network(self) -> tf.keras.Model:
        return self._q_network

    @tf.function(reduce_retracing=True)
    def _greedy(self, observation):
        return tf.argmax(self._q_network(observation, training=False), axis=-1, output_type=tf.int32)

    def greedy_actions(self, observation: np.ndarray) -> np.ndarray:
        return self._greedy(tf.convert_to_tensor(observation)).numpy()

    def select_actions(self, observation: np.ndarray, epsilon) -> np.ndarray:
        count = observation.shape[0]
        explore = self.rng.random(count) < epsilon
        random_actions = self.rng.integers(0, self._num_actions, size=count)
        if explore.all():  # early in training; skip the network
            return random_actions
        return np.where(explore, random_actions, self.greedy_actions(observation)).astype(np.int64)

    def network_changed(self) -> None:
        """Called whenever the network's weights were changed outside acting (updates, a restore, a broadcast);
        this actor reads the network itself, so there is nothing to do."""


class NoisyNetworkActor(EpsilonGreedyActor):
    """Acts greedily on a noisy network (Fortunato et al. 2018) with fresh noise at every step: `q_network` takes
    [observations, noise seeds] and each step's seed comes from the actor's own generator, so the noise repeats
    for a seed and a resume continues it. Its epsilon still applies (training's is 0 with noisy nets)."""

    @tf.function(reduce_retracing=True)
    def _noisy_greedy(self, observation, seed):
        seeds = tiled_seed(seed, tf.shape(observation)[0])
        return tf.argmax(self._q_network([observation, seeds], training=False), axis=-1, output_type=tf.int32)

    def greedy_actions(self, observation: np.ndarray) -> np.ndarray:
        seed = self.rng.integers(0, 2 ** 62, size=2)  # a first half >= 0: the noise on
        return self._noisy_greedy(tf.convert_to_tensor(observation), tf.constant(seed, tf.int64)).numpy()


class RolloutActor(EpsilonGreedyActor):
    """The actor of an agent whose network stays fixed while it collects a rollout (PQN): where the network is
    a small MLP it acts from a NumPy copy of the weights (`hvd_dqn.agent.numpy_forward`), taken at the first
    greedy action after each `network_changed()`, instead of a TensorFlow call per env step."""

    def __init__(self, q_network: tf.keras.Model, num_actions: int, rng: np.random.Generator):
        super().__init__(q_network, num_actions, rng)
        self._numpy_forward = NumpyForward.of(q_network)
        self._copy_is_current = False

    def network_changed(self) -> None:
        self._copy_is_current = False

    def greedy_actions(self, observation: np.ndarray) -> np.ndarray:
        if self._numpy_forward is None:
            return super().greedy_actions(observation)
        if not self._copy_is_current:
            self._numpy_forward.load()
            self._copy_is_current = True
        return np.argmax(self._numpy_forward(observation), axis=-1).astype(np.int32)
