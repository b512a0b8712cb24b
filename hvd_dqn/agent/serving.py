"""The greedy policy as a servable TensorFlow module: observations in, greedy actions and Q-values out.

Kept apart from the `hvd_dqn.export` entry point, which defines command-line flags, so the benchmark and the
tests can build the same module in processes that have flags of their own.
"""
from __future__ import annotations

import tensorflow as tf

POLICY_INFO = "hvd_dqn_policy.json"  # written beside saved_model.pb: what the policy expects and came from


def greedy_policy_module(q_network, observation_shape, observation_dtype):
    """A tf.Module whose `serve` maps a batch of observations to greedy actions and Q-values; saving it keeps
    the network's variables and the traced graph, not the Keras Python code."""

    class GreedyPolicy(tf.Module):
        def __init__(self):
            super().__init__(name="greedy_policy")
            self.q_network = q_network

        @tf.function(input_signature=[tf.TensorSpec((None, *observation_shape), observation_dtype,
                                                    name="observation")])
        def serve(self, observation):
            q_values = self.q_network(observation, training=False)
            return {"actions": tf.argmax(q_values, axis=-1, output_type=tf.int32), "q_values": q_values}

    return GreedyPolicy()


def save_greedy_policy(q_network, observation_shape, observation_dtype, folder: str) -> None:
    """Writes the greedy policy of `q_network` to `folder` as a SavedModel with its `serving_default` signature."""
    policy = greedy_policy_module(q_network, observation_shape, observation_dtype)
    tf.saved_model.save(policy, folder, signatures={"serving_default": policy.serve})
