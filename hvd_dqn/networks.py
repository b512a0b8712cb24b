"""Q-networks: observation in, one Q-value per action out."""
from __future__ import annotations

from typing import Sequence, Tuple

import tensorflow as tf


def build_mlp_q_network(observation_shape: Tuple[int, ...], num_actions: int, hidden_sizes: Sequence[int],
                        name: str = "q_network") -> tf.keras.Model:
    """A fully connected Q-network for vector observations: ReLU hidden layers, linear output (B, actions)."""
    observation = tf.keras.Input(shape=observation_shape, dtype=tf.float32, name="observation")
    hidden = tf.keras.layers.Flatten()(observation)
    for index, width in enumerate(hidden_sizes):
        hidden = tf.keras.layers.Dense(width, activation="relu", name=f"hidden_{index}")(hidden)
    q_values = tf.keras.layers.Dense(num_actions, name="q_values")(hidden)
    return tf.keras.Model(observation, q_values, name=name)
