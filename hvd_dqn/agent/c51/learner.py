"""C51's learner (Bellemare et al. 2017, "A Distributional Perspective on Reinforcement Learning"): DQN's online and
target networks and distributed update, with a categorical distribution of the return per action in place of its
Q-value.

The network gives logits (B, actions, atoms) over a fixed support z_i, --num_atoms evenly spaced on [v_min, v_max];
p_i(s, a) is their softmax and Q(s, a) = sum_i z_i p_i(s, a). The target of a transition moves each atom of the
target network's distribution at its greedy action a* (by the online network's Q with double DQN) to
r + discount * z_j, and projects these onto the support: atom j's probability is shared between the two atoms of the
support around its clipped value, in proportion to their nearness (the paper's equation 7 and Algorithm 1). The loss
is the cross-entropy of the predicted distribution of the action taken against that target.

Dopamine's JAX agents compute the same (google/dopamine, dopamine/jax/agents/rainbow/rainbow_agent.py,
`target_distribution`, `project_distribution` and `train`; full_rainbow/full_rainbow_agent.py for double DQN).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import ALLREDUCE_GROUPS, allreduce_groups
from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.optimizers import make_optimizer


def categorical_support(num_atoms: int, v_min: float, v_max: float) -> np.ndarray:
    """z_i = v_min + i (v_max - v_min) / (num_atoms - 1): the atoms every distribution lives on."""
    return np.linspace(v_min, v_max, num_atoms, dtype=np.float32)


def support_of(config) -> np.ndarray:
    """The config's support: --v_min (by default -v_max, as Dopamine's vmin=None) to --v_max in --num_atoms."""
    v_min = -config.v_max if config.v_min is None else config.v_min
    return categorical_support(config.num_atoms, v_min, config.v_max)


def project_distribution(values, probabilities, support):
    """(B, atoms): the distributions putting `probabilities` (B, M) on `values` (B, M), projected onto the evenly
    spaced `support` (atoms,): each value is clipped to [z_0, z_last] and its probability split between the atoms
    z_i within one spacing of it, by weight 1 - |value - z_i| / spacing (Bellemare et al. 2017, equation 7).

    Only the two atoms around a value have a weight above 0, so each value adds to those two: at b, its position
    in spacings from z_0, atom floor(b) gets 1 - (b - floor(b)) of it and the next atom the rest (Algorithm 1 of the
    paper). That is B x M additions, where the equation as written (and Dopamine's `project_distribution`) forms
    every atom's weight for every value, B x atoms x M: 5.2M terms per update at 201 atoms and batch 128."""
    support = tf.convert_to_tensor(support, tf.float32)
    atoms = tf.shape(support)[0]
    spacing = (support[-1] - support[0]) / tf.cast(atoms - 1, tf.float32)
    position = (tf.clip_by_value(values, support[0], support[-1]) - support[0]) / spacing  # b, in [0, atoms - 1]
    lower = tf.minimum(tf.cast(tf.floor(position), tf.int32), atoms - 1)
    upper = tf.minimum(lower + 1, atoms - 1)
    upper_share = position - tf.cast(lower, tf.float32)  # 0 where b is an atom (the upper's index may then repeat it)
    rows = tf.range(tf.shape(values)[0])[:, None] * atoms  # each transition's first atom in the flattened output
    flat = tf.math.unsorted_segment_sum(
        tf.concat([tf.reshape(probabilities * (1.0 - upper_share), [-1]), tf.reshape(probabilities * upper_share, [-1])],
                  axis=0),
        tf.concat([tf.reshape(rows + lower, [-1]), tf.reshape(rows + upper, [-1])], axis=0),
        tf.shape(values)[0] * atoms)
    return tf.reshape(flat, [-1, atoms])


def expected_values(logits, support):
    """Q = sum_i z_i softmax(logits)_i over the last axis."""
    return tf.reduce_sum(tf.nn.softmax(logits, axis=-1) * support, axis=-1)


class CategoricalLearner(DQNLearner):
    """DQN's learner on networks of logits (B, actions, atoms). Its update returns, as "td_errors", each
    transition's cross-entropy before the step: what prioritised replay takes its priorities from (Dopamine's
    Rainbow sets them to sqrt(loss + 1e-10), which --priority_alpha=0.5 with --priority_epsilon=1e-10
    reproduces)."""

    def __init__(self, online: tf.keras.Model, target: tf.keras.Model, optimizer, double_dqn: bool, support,
                 xla: bool = False, fp16_allreduce: bool = False, groups=ALLREDUCE_GROUPS):
        self.support = tf.constant(support, tf.float32)
        super().__init__(online, target, optimizer, double_dqn, xla=xla, fp16_allreduce=fp16_allreduce,
                         groups=groups)

    @classmethod
    def from_config(cls, config, online: tf.keras.Model, target: tf.keras.Model, world_size: int,
                    distributed: bool = True) -> "CategoricalLearner":
        return cls(online, target, make_optimizer(config, world_size, distributed), config.double_dqn,
                   support_of(config), xla=config.xla, fp16_allreduce=config.fp16_allreduce,
                   groups=allreduce_groups(config.elastic))

    def _targets(self, reward_t, discount_t, observation_t):
        """(B, atoms): the target network's distribution at s' and a*, moved by r + discount z and projected."""
        logits_t = self._target_forward(observation_t, training=False)
        selector = self._online_forward(observation_t, training=False) if self.double_dqn else logits_t
        best_action = tf.argmax(expected_values(selector, self.support), axis=-1, output_type=tf.int32)
        next_probabilities = tf.nn.softmax(tf.gather(logits_t, best_action, axis=1, batch_dims=1), axis=-1)
        moved = reward_t[:, None] + discount_t[:, None] * self.support[None, :]
        return tf.stop_gradient(project_distribution(moved, next_probabilities, self.support))

    def _loss(self, observation_tm1, action_tm1, target_tm1, weights):
        """(the weighted mean cross-entropy, Q of the actions taken, each transition's cross-entropy, and the
        standard deviation of each taken action's return distribution on the support)."""
        logits_tm1 = self._online_forward(observation_tm1, training=True)
        taken = tf.gather(logits_tm1, action_tm1, axis=1, batch_dims=1)  # (B, atoms)
        cross_entropy = -tf.reduce_sum(target_tm1 * tf.nn.log_softmax(taken, axis=-1), axis=-1)
        probabilities = tf.nn.softmax(tf.cast(taken, tf.float32), axis=-1)
        q_taken = tf.reduce_sum(probabilities * self.support, axis=-1)
        second_moment = tf.reduce_sum(probabilities * self.support ** 2, axis=-1)
        return_std = tf.sqrt(tf.maximum(second_moment - q_taken ** 2, 0.0))
        return tf.reduce_mean(weights * cross_entropy), q_taken, cross_entropy, {"return_std": return_std}
