"""A NumPy copy of a small Q-network's forward pass, for acting.

Acting asks the network for a handful of observations at every env step. For the MLPs of classic control a
TensorFlow call costs hundreds of microseconds on a CPU core (the dispatch of a tf.function, not the
arithmetic), several times the env step itself, so an agent whose network stays fixed for many steps (PQN holds
it through a rollout) acts an order of magnitude faster from a copy of its weights in NumPy.

Only a chain of the layers the MLP presets build is copied (Flatten, Dense with no or ReLU activation,
LayerNormalization over the last axis, ReLU); any other network (convolutions, a dueling head) gets None and
acts through TensorFlow as before. A copy is also checked against the network on random inputs when it is made,
so a layer whose options it does not follow is found there, not in play.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np
import tensorflow as tf


def _relu(values: np.ndarray) -> np.ndarray:
    return np.maximum(values, 0.0)


def _activation(name) -> Optional[Callable]:
    name = getattr(name, "__name__", name)
    return {"linear": lambda values: values, "relu": _relu}.get(name)


class NumpyForward:
    """`forward(observation) -> Q-values` for a batch, from the weights last copied by `load()`."""

    def __init__(self, steps: List[Tuple[str, object, tf.keras.layers.Layer]]):
        self._steps = steps  # (kind, its option: an activation or LayerNorm's epsilon, the layer)
        self._weights: List[List[np.ndarray]] = []

    @classmethod
    def of(cls, model: tf.keras.Model) -> Optional["NumpyForward"]:
        """A copy of `model`'s forward pass, or None if it is not a chain of the layers copied here."""
        steps = []
        for layer in model.layers:
            kind = type(layer).__name__
            if kind == "InputLayer":
                continue
            if kind == "Flatten":
                steps.append(("flatten", None, layer))
            elif kind == "Dense" and _activation(layer.activation) is not None:
                steps.append(("dense", _activation(layer.activation), layer))
            elif kind == "LayerNormalization" and list(np.atleast_1d(layer.axis)) in ([-1], [1]) \
                    and len(model.output_shape) == 2:
                steps.append(("layer_norm", float(layer.epsilon), layer))
            elif kind in ("Activation", "ReLU") and _activation(getattr(layer, "activation", "relu")) is not None:
                steps.append(("activation", _activation(getattr(layer, "activation", "relu")), layer))
            else:
                return None
        copy = cls(steps)
        copy.load()
        probe = np.random.default_rng(0).normal(size=(8,) + tuple(model.input_shape[1:])).astype(np.float32)
        expected = model(probe, training=False).numpy()
        if not np.allclose(copy(probe), expected, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(expected).max()))):
            return None
        return copy

    def load(self) -> None:
        """Copies the network's current weights."""
        self._weights = [[np.array(weight, dtype=np.float32) for weight in layer.get_weights()]
                         for _, _, layer in self._steps]

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        values = np.asarray(observation, dtype=np.float32)
        for (kind, option, layer), weights in zip(self._steps, self._weights):
            if kind == "flatten":
                values = values.reshape(len(values), -1)
            elif kind == "dense":
                values = option(values @ weights[0] + weights[1] if len(weights) > 1 else values @ weights[0])
            elif kind == "layer_norm":
                mean = values.mean(axis=-1, keepdims=True)
                variance = values.var(axis=-1, keepdims=True)
                values = (values - mean) / np.sqrt(variance + option)
                scale_and_centre = iter(weights)
                if layer.scale:
                    values = values * next(scale_and_centre)
                if layer.center:
                    values = values + next(scale_and_centre)
            else:
                values = option(values)
        return values
