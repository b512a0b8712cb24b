"""IQN's network (Dabney et al. 2018, section 3.1): Z_tau(s, a) for a batch of observations and, for each, a
number of quantile levels tau in [0, 1].

    psi(s)   the torso's features (the Nature CNN's convolutions, MinAtar's, or all but the last MLP layer), D wide
    phi(tau) ReLU(Dense_D(cos(pi i tau) for i = 1..n)), the cosine embedding of each tau
    Z_tau    Dense_A(ReLU(Dense_W(psi(s) * phi(tau))))  with W the network's last hidden width (512 on Atari)

as Dopamine's ImplicitQuantileNetwork builds it (google/dopamine, dopamine/jax/networks.py), every kernel with its
initialiser. The model takes [observations (B, ...), taus (B, N)] and returns (B, N, actions)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.dqn.settings import layer_norm
from hvd_dqn.agent.networks import Head, dense, feature_torso, hidden_layer


def build_implicit_quantile_network(config, spec, name: str, embedding_dim: int) -> tf.keras.Model:
    head = Head(initializer="dopamine_fan_in")
    observation, features, width = feature_torso(config, spec, head)
    taus = tf.keras.Input(shape=(None,), dtype=tf.float32, name="taus")
    # In float32 under --mixed_precision too: the levels and their cosines are the embedding's input, and a float16
    # policy would otherwise cast the levels before the float32 frequencies meet them.
    cosines = tf.keras.layers.Lambda(
        lambda levels: tf.cos(np.pi * levels[..., None] * tf.range(1, embedding_dim + 1, dtype=tf.float32)),
        name="tau_cosines", dtype="float32")(taus)
    embedding = tf.keras.layers.Dense(features.shape[-1], activation="relu", name="tau_embedding",
                                      kernel_initializer=head.kernel_initializer())(cosines)
    merged = tf.keras.layers.Lambda(lambda pair: pair[0][:, None, :] * pair[1], name="merge")([features, embedding])
    hidden = hidden_layer(dense(width, "hidden", layer_norm(config), head), merged, "hidden", layer_norm(config))
    values = tf.keras.layers.Dense(spec.num_actions, name="quantile_values", dtype="float32",
                                   kernel_initializer=head.kernel_initializer())(hidden)
    return tf.keras.Model([observation, taus], values, name=name)


def mean_at_levels(network: tf.keras.Model, levels: np.ndarray) -> tf.keras.Model:
    """Q(s, a) as the mean of Z at the fixed `levels`, a model of the observations alone sharing `network`'s
    weights."""
    observation, values = _at_levels(network, levels)
    q_values = tf.keras.layers.Lambda(lambda z: tf.reduce_mean(z, axis=1), name="q_values", dtype="float32")(values)
    return tf.keras.Model(observation, q_values, name=f"{network.name}_q_values")


def quantiles_at_levels(network: tf.keras.Model, levels: np.ndarray) -> tf.keras.Model:
    """Z at the fixed `levels` as (B, actions, levels), a model of the observations alone sharing `network`'s
    weights: the quantile function an export serves."""
    observation, values = _at_levels(network, levels)
    by_action = tf.keras.layers.Lambda(lambda z: tf.transpose(z, [0, 2, 1]), name="quantiles", dtype="float32")(values)
    return tf.keras.Model(observation, by_action, name=f"{network.name}_quantiles")


def _at_levels(network: tf.keras.Model, levels: np.ndarray):
    """(observations input, Z at `levels` (B, levels, actions)) of `network` with its levels fixed."""
    observation = network.inputs[0]
    taus = tf.keras.layers.Lambda(
        lambda batch: tf.tile(tf.constant(levels[None], tf.float32), [tf.shape(batch)[0], 1]), name="levels")(observation)
    return observation, network([observation, taus])
