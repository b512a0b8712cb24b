"""Noisy networks (Fortunato et al. 2018, "Noisy Networks for Exploration"): fully connected layers whose weights
carry learned Gaussian noise, so that exploration comes from the network itself instead of epsilon-greedy draws.

A noisy layer computes y = (mu_W + sigma_W * eps_W) x + mu_b + sigma_b * eps_b with factorised noise (the paper's
section 3, equations 10-11): p + q standard normal draws give eps_W = f(eps_in) f(eps_out)^T and eps_b = f(eps_out),
f(x) = sgn(x) sqrt(|x|). mu starts uniform in [-1/sqrt(p), 1/sqrt(p)] and sigma at sigma0 / sqrt(p) (section 3.2;
the paper's and Hessel et al.'s sigma0 is 0.5, Dopamine's FullRainbowNetwork starts at 0.1).

The noise is drawn from a stateless generator keyed by a seed the network takes as an input, "noise_seed": (B, 2)
int64, one key for the whole batch (as Dopamine's full Rainbow draws one noise per network call). Each layer folds
its own name into the key, so layers draw apart. So the noise is part of no variable: a run repeats it for a seed,
a resume continues it, ranks draw their own, and a key whose first half is negative turns the noise off, which is
the network evaluation, export and the target of a checkpoint use (Dopamine's eval_mode).
"""
from __future__ import annotations

import zlib

import numpy as np
import tensorflow as tf

NOISE_INPUT = "noise_seed"
NOISE_OFF = -1  # a seed's first half below 0: the layers' means alone


def noise_input() -> tf.Tensor:
    return tf.keras.Input(shape=(2,), dtype=tf.int64, name=NOISE_INPUT)


def is_noisy(network: tf.keras.Model) -> bool:
    return any(tensor.name.split(":")[0] == NOISE_INPUT for tensor in network.inputs[1:])


def _signed_sqrt(values):
    return tf.sign(values) * tf.sqrt(tf.abs(values))


class NoisyDense(tf.keras.layers.Layer):
    """A fully connected layer with factorised Gaussian noise on its weights and biases. Called on [features,
    noise seeds (B, 2)]; the first row's seed keys the batch's noise."""

    def __init__(self, units: int, sigma0: float, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.sigma0 = float(sigma0)
        self.activation = tf.keras.activations.get(activation)
        # A key of this layer's own, folded into the network's seed (crc32 of the name: the same in every process).
        self.layer_key = zlib.crc32(self.name.encode()) & 0x7FFFFFFF

    def build(self, input_shape):
        fan_in = int(input_shape[0][-1])
        bound = 1.0 / np.sqrt(fan_in)
        sigma = self.sigma0 / np.sqrt(fan_in)

        def weight(name, shape, initializer):
            return self.add_weight(name=name, shape=shape, initializer=initializer, trainable=True)

        # A fresh initializer per weight: an unseeded Keras initializer called twice repeats its values.
        self.kernel_mu = weight("kernel_mu", (fan_in, self.units), tf.keras.initializers.RandomUniform(-bound, bound))
        self.kernel_sigma = weight("kernel_sigma", (fan_in, self.units), tf.keras.initializers.Constant(sigma))
        self.bias_mu = weight("bias_mu", (self.units,), tf.keras.initializers.RandomUniform(-bound, bound))
        self.bias_sigma = weight("bias_sigma", (self.units,), tf.keras.initializers.Constant(sigma))
        super().build(input_shape)

    def noise(self, seed):
        """(f(eps_in) (p,), f(eps_out) (q,)) for a seed (2,), zeros where the seed turns noise off."""
        fan_in = self.kernel_mu.shape[0]
        on = tf.cast(seed[0] >= 0, tf.float32)
        draws = tf.random.stateless_normal([fan_in + self.units],
                                           seed=tf.random.experimental.stateless_fold_in(seed, self.layer_key))
        factors = _signed_sqrt(draws) * on
        return factors[:fan_in], factors[fan_in:]

    def call(self, inputs):
        features, seeds = inputs
        input_noise, output_noise = self.noise(seeds[0])
        input_noise = tf.cast(input_noise, self.compute_dtype)
        output_noise = tf.cast(output_noise, self.compute_dtype)
        kernel = self.kernel_mu + self.kernel_sigma * (input_noise[:, None] * output_noise[None, :])
        bias = self.bias_mu + self.bias_sigma * output_noise
        return self.activation(tf.matmul(features, kernel) + bias)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "sigma0": self.sigma0,
                "activation": tf.keras.activations.serialize(self.activation)}


def without_noise(network: tf.keras.Model) -> tf.keras.Model:
    """A noisy network as a model of its observations alone, with the noise off (its layers' means): the greedy
    policy evaluation, export and the Runner act with. The weights are `network`'s own."""
    observation = network.inputs[0]
    seeds = tf.keras.layers.Lambda(lambda batch: tf.fill([tf.shape(batch)[0], 2], tf.constant(NOISE_OFF, tf.int64)),
                                   name="no_noise")(observation)
    return tf.keras.Model(observation, network([observation, seeds]), name=f"{network.name}_means")


def tiled_seed(seed, batch_size) -> tf.Tensor:
    """The (B, 2) noise input for one seed (2,) of int64."""
    return tf.tile(tf.reshape(tf.cast(seed, tf.int64), [1, 2]), [batch_size, 1])
