"""Munchausen DQN's learner (Vieillard, Pietquin and Geist 2020, "Munchausen Reinforcement Learning", NeurIPS;
arXiv:2007.14430): DQN's update with the target of soft Q-learning plus a bonus for the action taken.

With pi = softmax(Q_target / tau), the policy the target network implies at temperature tau, the target of a
transition (s, a, r, s') is

    r + alpha * clip(tau log pi(a|s), l0, 0) + discount * sum_a' pi(a'|s') (Q_target(s', a') - tau log pi(a'|s'))

(the paper's equation 2 with its clipping, section 3; `discount` is gamma^n, or 0 after a terminal, as the replay
memory gives it: with n-step returns the bonus is the first action's, as in the authors' Dopamine code with
update_horizon > 1). tau log pi is computed as (q - max q) - tau log sum exp((q - max q) / tau), which never
overflows however small tau is. The authors' code: google-research/google-research, munchausen_rl/agents/m_dqn.py
(`_build_target_q_op`) and common/utils.py (`stable_scaled_log_softmax`).
"""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.dqn.learner import DQNLearner


def scaled_log_policy(q_values, tau: float):
    """tau log softmax(q / tau) over the last axis: (q - max) - tau log sum exp((q - max) / tau)."""
    shifted = q_values - tf.reduce_max(q_values, axis=-1, keepdims=True)
    return shifted - tau * tf.reduce_logsumexp(shifted / tau, axis=-1, keepdims=True)


def munchausen_targets(reward_t, discount_t, q_target_tm1, action_tm1, q_target_t, tau: float, alpha: float,
                       log_policy_clip: float):
    """(B,) Munchausen targets from the target network's Q-values at s (`q_target_tm1`) and s' (`q_target_t`)."""
    tau_log_pi_tm1 = tf.gather(scaled_log_policy(q_target_tm1, tau), action_tm1, axis=-1, batch_dims=1)
    bonus = alpha * tf.clip_by_value(tau_log_pi_tm1, log_policy_clip, 0.0)
    tau_log_pi_t = scaled_log_policy(q_target_t, tau)
    soft_value_t = tf.reduce_sum(tf.nn.softmax(q_target_t / tau, axis=-1) * (q_target_t - tau_log_pi_t), axis=-1)
    return reward_t + bonus + discount_t * soft_value_t


class MunchausenLearner(DQNLearner):
    """DQN's learner (its networks, loss, optimizer and distributed update) with Munchausen targets."""

    entropy_temperature = 0.03
    munchausen_scale = 0.9
    log_policy_clip = -1.0

    @classmethod
    def from_config(cls, config, online, target, world_size: int, distributed: bool = True) -> "MunchausenLearner":
        learner = super().from_config(config, online, target, world_size, distributed)
        learner.entropy_temperature = config.entropy_temperature
        learner.munchausen_scale = config.munchausen_scale
        learner.log_policy_clip = config.log_policy_clip
        return learner

    def _targets_of(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t):
        q_target_tm1 = self._target_forward(observation_tm1, training=False)
        q_target_t = self._target_forward(observation_t, training=False)
        return tf.stop_gradient(munchausen_targets(
            reward_t, discount_t, q_target_tm1, action_tm1, q_target_t, self.entropy_temperature,
            self.munchausen_scale, self.log_policy_clip))
