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


def build_nature_cnn_q_network(observation_shape: Tuple[int, ...], num_actions: int,
                               name: str = "q_network") -> tf.keras.Model:
    """The Q-network of Mnih et al. (2015): 3 convolutions and 2 dense layers over stacked frames.

    Input: uint8 stacks (B, frames, H, W), channels first as the emulator returns them. The cast to float
    and the scaling to [0, 1] happen inside the model, so only uint8 (a quarter of the bytes) crosses to
    the device; the transpose to channels-last is there because TensorFlow's CPU convolutions need it.
    """
    frames = tf.keras.Input(shape=observation_shape, dtype=tf.uint8, name="frames")
    hidden = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32) / 255.0, name="scale")(frames)
    hidden = tf.keras.layers.Permute((2, 3, 1), name="channels_last")(hidden)
    for index, (filters, size, stride) in enumerate([(32, 8, 4), (64, 4, 2), (64, 3, 1)]):
        hidden = tf.keras.layers.Conv2D(filters, size, strides=stride, activation="relu", name=f"conv_{index}")(hidden)
    hidden = tf.keras.layers.Flatten()(hidden)
    hidden = tf.keras.layers.Dense(512, activation="relu", name="hidden")(hidden)
    q_values = tf.keras.layers.Dense(num_actions, name="q_values")(hidden)
    return tf.keras.Model(frames, q_values, name=name)


def is_image_observation(observation_shape: Tuple[int, ...], observation_dtype) -> bool:
    """Stacked uint8 frames (frames, H, W) rather than a feature vector."""
    return len(observation_shape) == 3 and observation_dtype == "uint8"


def build_q_network(observation_shape: Tuple[int, ...], observation_dtype, num_actions: int,
                    hidden_sizes: Sequence[int], name: str = "q_network") -> tf.keras.Model:
    """The Nature CNN for stacked frames, the MLP (`hidden_sizes`) for vector observations."""
    if is_image_observation(observation_shape, observation_dtype):
        return build_nature_cnn_q_network(observation_shape, num_actions, name)
    return build_mlp_q_network(observation_shape, num_actions, hidden_sizes, name)
