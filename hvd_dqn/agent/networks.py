"""Q-networks: observation in, one Q-value per action out, from a single linear head or dueling heads.

Dueling heads (Wang et al. 2016) estimate a state value V(s) and action advantages A(s, a) in two streams
and combine them as Q(s, a) = V(s) + A(s, a) - mean_a A(s, a); subtracting the mean makes V and A
identifiable without changing which action is greedy.

With `layer_norm` every hidden layer is linear, then LayerNorm (Ba et al. 2016) over its features, then ReLU:
what PQN (Gallici et al. 2024, arXiv:2407.04811) relies on, in place of a target network, to keep Q-learning
stable. Its reference code (mttga/purejaxql) normalises each layer's last axis, the channels of a convolution;
so do these networks. Without it the networks are exactly those of the papers each builder cites.

A `Head` with atoms gives each action a vector of that many outputs instead of one Q-value, (B, actions, atoms):
the quantiles of the return of QR-DQN (Dabney et al. 2017) or the logits of C51's categorical distribution
(Bellemare et al. 2017), built on the same torsos. A noisy `Head` makes every fully connected layer a noisy one
(Fortunato et al. 2018; `hvd_dqn.agent.noisy`), convolutions staying as they are, as Dopamine's FullRainbowNetwork
does; the network then takes the noise's seed as a second input.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, Tuple

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.dqn.settings import dueling, layer_norm, noisy_nets
from hvd_dqn.agent.noisy import NoisyDense, noise_input


# Dopamine's QuantileNetwork (google/dopamine, dopamine/jax/networks.py) initialises every kernel from a uniform
# distribution of variance scale 1/sqrt(3) over the fan-in (flax's variance_scaling, which Keras' VarianceScaling
# defines alike); Keras' and Dopamine's DQN networks use Glorot's uniform.
INITIALIZERS = {
    "glorot_uniform": lambda: "glorot_uniform",
    "dopamine_fan_in": lambda: tf.keras.initializers.VarianceScaling(1.0 / np.sqrt(3.0), "fan_in", "uniform"),
}


@dataclasses.dataclass(frozen=True)
class Head:
    """What the network outputs per action: one Q-value (atoms 0), or `atoms` values (B, actions, atoms); and
    the initialiser of every kernel (a name in INITIALIZERS; each layer gets an initialiser of its own, since
    an unseeded Keras initialiser called twice repeats its values)."""
    atoms: int = 0
    initializer: str = "glorot_uniform"
    noisy: bool = False  # every fully connected layer noisy, its noise's scale starting at sigma0 / sqrt(fan-in)
    sigma0: float = 0.5

    def kernel_initializer(self):
        return INITIALIZERS[self.initializer]()


def hidden_layer(layer, inputs, name: str, layer_norm: bool):
    """`layer` (a Dense or Conv2D without activation when `layer_norm`) applied to `inputs`, then ReLU; with
    `layer_norm` a LayerNormalization over the last axis comes between them."""
    if not layer_norm:
        return layer(inputs)
    normalised = tf.keras.layers.LayerNormalization(axis=-1, name=f"{name}_norm")(layer(inputs))
    return tf.keras.layers.Activation("relu", name=f"{name}_relu")(normalised)


def fully_connected(units: int, name: str, head: Head, noise=None, activation=None, dtype=None):
    """A fully connected layer as a callable on features: Keras' Dense, or (given the network's noise input) a
    NoisyDense keyed by it."""
    if noise is None:
        return tf.keras.layers.Dense(units, activation=activation, name=name, dtype=dtype,
                                     kernel_initializer=head.kernel_initializer())
    layer = NoisyDense(units, head.sigma0, activation=activation, name=name, dtype=dtype)
    return lambda features: layer([features, noise])


def dense(width: int, name: str, layer_norm: bool, head: Head = Head(), noise=None):
    return fully_connected(width, name, head, noise, activation=None if layer_norm else "relu")


def output_layer(units: int, name: str, head: Head, per_action: int, noise=None):
    """A linear float32 layer of `units` outputs; with atoms, reshaped to (per_action, atoms)."""
    layer = fully_connected(units * max(head.atoms, 1), name, head, noise, dtype="float32")
    if not head.atoms:
        return layer
    reshape = tf.keras.layers.Reshape((per_action, head.atoms), name=f"{name}_atoms", dtype="float32")
    return lambda features: reshape(layer(features))


def q_head(features, num_actions: int, dueling: bool, stream_width: int = 0, layer_norm: bool = False,
           head: Head = Head(), noise=None):
    """Q-values (B, actions) from shared features, or with atoms (B, actions, atoms): one linear layer, or
    dueling value and advantage streams, each with a ReLU layer of `stream_width` units first when it is > 0
    (the Nature CNN's 512). The outputs are float32 even under --mixed_precision's float16 policy (Keras' advice:
    a float16 output loses the small differences between Q-values that decide the greedy action)."""
    name = "quantiles" if head.atoms else "q_values"
    if not dueling:
        if stream_width:
            features = hidden_layer(dense(stream_width, "hidden", layer_norm, head, noise), features, "hidden",
                                    layer_norm)
        return output_layer(num_actions, name, head, num_actions, noise)(features)
    value, advantage = features, features
    if stream_width:
        value = hidden_layer(dense(stream_width, "value_hidden", layer_norm, head, noise), value, "value_hidden",
                             layer_norm)
        advantage = hidden_layer(dense(stream_width, "advantage_hidden", layer_norm, head, noise), advantage,
                                 "advantage_hidden", layer_norm)
    value = output_layer(1, "value", head, 1, noise)(value)
    advantage = output_layer(num_actions, "advantage", head, num_actions, noise)(advantage)
    actions_axis = 1  # (B, actions) or (B, actions, atoms): the mean advantage is over the actions
    return tf.keras.layers.Lambda(
        lambda streams: streams[0] + streams[1] - tf.reduce_mean(streams[1], axis=actions_axis, keepdims=True),
        name=name, dtype="float32")([value, advantage])


def build_mlp_q_network(observation_shape: Tuple[int, ...], num_actions: int, hidden_sizes: Sequence[int],
                        name: str = "q_network", dueling: bool = False, layer_norm: bool = False,
                        head: Head = Head()) -> tf.keras.Model:
    """A fully connected Q-network for vector observations: ReLU hidden layers shared by the linear output
    (or, dueling, by linear value and advantage layers), Q-values (B, actions)."""
    noise = noise_input() if head.noisy else None
    observation, hidden = _mlp_torso(observation_shape, hidden_sizes, layer_norm, head, noise)
    return _model(observation, noise, q_head(hidden, num_actions, dueling, head=head, noise=noise), name)


def _model(observation, noise, outputs, name: str) -> tf.keras.Model:
    """The Keras model of a Q-network: of its observations, and of the noise's seed too when it is noisy."""
    return tf.keras.Model(observation if noise is None else [observation, noise], outputs, name=name)


def _mlp_torso(observation_shape, hidden_sizes: Sequence[int], layer_norm: bool, head: Head, noise=None):
    """(input, features): the vector observation through ReLU layers of `hidden_sizes` (noisy ones, given the
    network's noise input)."""
    observation = tf.keras.Input(shape=observation_shape, dtype=tf.float32, name="observation")
    hidden = tf.keras.layers.Flatten()(observation)
    for index, width in enumerate(hidden_sizes):
        hidden = hidden_layer(dense(width, f"hidden_{index}", layer_norm, head, noise), hidden, f"hidden_{index}",
                              layer_norm)
    return observation, hidden


def build_nature_cnn_q_network(observation_shape: Tuple[int, ...], num_actions: int,
                               name: str = "q_network", dueling: bool = False, padding: str = "valid",
                               layer_norm: bool = False, head: Head = Head()) -> tf.keras.Model:
    """The Q-network of Mnih et al. (2015): 3 convolutions and 2 dense layers over stacked frames; dueling,
    the 512-unit layer and the output are doubled into value and advantage streams, as Wang et al. (2016).

    Input: uint8 stacks (B, frames, H, W), channels first as the emulator returns them. The cast to float
    and the scaling to [0, 1] happen inside the model, so only uint8 (a quarter of the bytes) crosses to
    the device; the transpose to channels-last is there because TensorFlow's CPU convolutions need it.
    `padding="same"` pads the convolutions as Flax does by default, which makes Dopamine's JAX
    NatureDQNNetwork (google/dopamine, dopamine/jax/networks.py) a larger network than the paper's: 84x84 ->
    21x21 -> 11x11 -> 11x11, so 7,744 features into the 512-unit layer instead of 3,136.
    """
    noise = noise_input() if head.noisy else None
    frames, hidden = _nature_cnn_torso(observation_shape, padding, layer_norm, head)
    return _model(frames, noise, q_head(hidden, num_actions, dueling, stream_width=512, layer_norm=layer_norm,
                                        head=head, noise=noise), name)


def _nature_cnn_torso(observation_shape, padding: str, layer_norm: bool, head: Head):
    """(input, features): stacked uint8 frames through the Nature CNN's three convolutions, flattened."""
    frames = tf.keras.Input(shape=observation_shape, dtype=tf.uint8, name="frames")
    hidden = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32) / 255.0, name="scale")(frames)
    hidden = tf.keras.layers.Permute((2, 3, 1), name="channels_last")(hidden)
    for index, (filters, size, stride) in enumerate([(32, 8, 4), (64, 4, 2), (64, 3, 1)]):
        convolution = tf.keras.layers.Conv2D(filters, size, strides=stride, padding=padding,
                                             activation=None if layer_norm else "relu", name=f"conv_{index}",
                                             kernel_initializer=head.kernel_initializer())
        hidden = hidden_layer(convolution, hidden, f"conv_{index}", layer_norm)
    return frames, tf.keras.layers.Flatten()(hidden)


def build_minatar_q_network(observation_shape: Tuple[int, ...], num_actions: int, name: str = "q_network",
                            dueling: bool = False, layer_norm: bool = False, head: Head = Head()) -> tf.keras.Model:
    """The Q-network of MinAtar's DQN (Young & Tian 2019; kenjyoung/MinAtar, examples/dqn.py): one 3x3
    convolution with 16 filters at stride 1 without padding (10x10 -> 8x8), a 128-unit ReLU layer and a linear
    output; dueling, the 128-unit layer is doubled into value and advantage streams.

    Input: the game's bool grids (B, 10, 10, channels), channels last as MinAtar returns them, cast to float
    inside the model so the replay memory and the device only see the compact bools."""
    noise = noise_input() if head.noisy else None
    grid, hidden = _minatar_torso(observation_shape, layer_norm, head)
    return _model(grid, noise, q_head(hidden, num_actions, dueling, stream_width=128, layer_norm=layer_norm,
                                      head=head, noise=noise), name)


def _minatar_torso(observation_shape, layer_norm: bool, head: Head):
    """(input, features): MinAtar's bool grids through its one convolution, flattened."""
    grid = tf.keras.Input(shape=observation_shape, dtype=tf.bool, name="grid")
    hidden = tf.keras.layers.Lambda(lambda x: tf.cast(x, tf.float32), name="to_float")(grid)
    convolution = tf.keras.layers.Conv2D(16, 3, strides=1, padding="valid", activation=None if layer_norm else "relu",
                                         name="conv", kernel_initializer=head.kernel_initializer())
    return grid, tf.keras.layers.Flatten()(hidden_layer(convolution, hidden, "conv", layer_norm))


def is_image_observation(observation_shape: Tuple[int, ...], observation_dtype) -> bool:
    """Stacked uint8 frames (frames, H, W) rather than a feature vector."""
    return len(observation_shape) == 3 and np.dtype(observation_dtype) == np.uint8


def is_grid_observation(observation_shape: Tuple[int, ...], observation_dtype) -> bool:
    """MinAtar's bool object grids (H, W, channels)."""
    return len(observation_shape) == 3 and np.dtype(observation_dtype) == np.bool_


def network_kind(network: str, observation_shape: Tuple[int, ...], observation_dtype) -> str:
    """The network `network` names; "auto": the Nature CNN for stacked frames, MinAtar's CNN for bool grids,
    the MLP for vector observations."""
    if network != "auto":
        return network
    return ("nature_cnn" if is_image_observation(observation_shape, observation_dtype) else
            "minatar_cnn" if is_grid_observation(observation_shape, observation_dtype) else "mlp")


def build_q_network(observation_shape: Tuple[int, ...], observation_dtype, num_actions: int,
                    hidden_sizes: Sequence[int], name: str = "q_network", dueling: bool = False,
                    network: str = "auto", conv_padding: str = "valid", layer_norm: bool = False,
                    head: Head = Head()) -> tf.keras.Model:
    """The Q-network `network` names; "auto": the Nature CNN for stacked frames, MinAtar's CNN for bool grids,
    the MLP (`hidden_sizes`) for vector observations. `head`: one Q-value per action, or atoms of them."""
    network = network_kind(network, observation_shape, observation_dtype)
    if network == "nature_cnn":
        return build_nature_cnn_q_network(observation_shape, num_actions, name, dueling, conv_padding, layer_norm,
                                          head)
    if network == "minatar_cnn":
        return build_minatar_q_network(observation_shape, num_actions, name, dueling, layer_norm, head)
    if network == "mlp":
        return build_mlp_q_network(observation_shape, num_actions, hidden_sizes, name, dueling, layer_norm, head)
    raise ValueError(f"unknown network {network!r}")


def feature_torso(config, spec, head: Head):
    """(input, features, width) for a network that merges something into the torso's features before its last
    hidden layer (IQN's quantile embedding): the Nature CNN's convolutions (then 512 units), MinAtar's (then 128),
    or all but the last of --hidden_sizes (then the last), as `build_q_network` chooses the network."""
    network = network_kind(config.network, spec.observation_shape, spec.observation_dtype)
    if network == "nature_cnn":
        return (*_nature_cnn_torso(spec.observation_shape, config.conv_padding, layer_norm(config), head), 512)
    if network == "minatar_cnn":
        return (*_minatar_torso(spec.observation_shape, layer_norm(config), head), 128)
    return (*_mlp_torso(spec.observation_shape, config.hidden_sizes[:-1], layer_norm(config), head),
            config.hidden_sizes[-1])


def q_network_for(config, spec, name: str, head: Head = Head()) -> tf.keras.Model:
    """The Q-network a TrainConfig describes, for an env of `spec` (hvd_dqn.envs.EnvSpec), with `head`'s outputs,
    noisy with --noisy_nets."""
    if noisy_nets(config):
        head = dataclasses.replace(head, noisy=True, sigma0=config.noisy_sigma0)
    return build_q_network(spec.observation_shape, spec.observation_dtype, spec.num_actions, config.hidden_sizes,
                           name, dueling(config), config.network, config.conv_padding, layer_norm(config), head)
