"""The greedy policy as a servable TensorFlow module: observations in, greedy actions and Q-values out, and for an
agent that learns the return's distribution, that distribution too.

Kept apart from the `hvd_dqn.export` entry point, which defines command-line flags, so the benchmark and the
tests can build the same module in processes that have flags of their own.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from hvd_dqn.agent.interface import ServedDistribution

POLICY_INFO = "hvd_dqn_policy.json"  # written beside saved_model.pb: what the policy expects and came from
DISTRIBUTION_SIGNATURE = "distribution"  # the signature of a distributional agent's export, beside serving_default


def greedy_policy_module(q_network, observation_shape, observation_dtype,
                         distribution: Optional[ServedDistribution] = None):
    """A tf.Module whose `serve` maps a batch of observations to greedy actions and Q-values, and, given the
    agent's `distribution`, whose `serve_distribution` adds that distribution (B, actions, points); saving it keeps
    the networks' variables and the traced graphs, not the Keras Python code."""
    observation_spec = tf.TensorSpec((None, *observation_shape), observation_dtype, name="observation")

    def greedy(observation):
        q_values = q_network(observation, training=False)
        return {"actions": tf.argmax(q_values, axis=-1, output_type=tf.int32), "q_values": q_values}

    class GreedyPolicy(tf.Module):
        def __init__(self):
            super().__init__(name="greedy_policy")
            self.q_network = q_network
            if distribution is not None:
                self.distribution_network = distribution.model

        @tf.function(input_signature=[observation_spec])
        def serve(self, observation):
            return greedy(observation)

        if distribution is not None:
            @tf.function(input_signature=[observation_spec])
            def serve_distribution(self, observation):
                outputs = greedy(observation)
                outputs[distribution.output] = tf.cast(self.distribution_network(observation, training=False),
                                                       tf.float32)
                return outputs

    return GreedyPolicy()


def save_greedy_policy(q_network, observation_shape, observation_dtype, folder: str,
                       distribution: Optional[ServedDistribution] = None) -> None:
    """Writes the greedy policy of `q_network` to `folder` as a SavedModel with its `serving_default` signature,
    and with `distribution`, a `distribution` signature that serves it beside the greedy action and Q-values."""
    policy = greedy_policy_module(q_network, observation_shape, observation_dtype, distribution)
    signatures = {"serving_default": policy.serve}
    if distribution is not None:
        signatures[DISTRIBUTION_SIGNATURE] = policy.serve_distribution
    tf.saved_model.save(policy, folder, signatures=signatures)
