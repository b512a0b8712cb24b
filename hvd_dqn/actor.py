"""Acting: epsilon-greedy action selection from the online Q-network, for a batch of environments."""
from __future__ import annotations

import numpy as np
import tensorflow as tf


class EpsilonGreedyActor:
    """Chooses a_t for each environment: uniformly random with probability epsilon, else argmax_a Q(s_t, a).

    `epsilon` may be a scalar or one value per environment. Random draws come from the actor's own
    generator (seeded per rank), so runs repeat for a given seed.
    """

    def __init__(self, q_network: tf.keras.Model, num_actions: int, rng: np.random.Generator):
        self._q_network = q_network
        self._num_actions = num_actions
        self.rng = rng

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
