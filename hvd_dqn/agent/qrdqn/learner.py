"""QR-DQN's learner: DQN's online and target networks and distributed update, with quantiles of the return in
place of Q-values and the quantile Huber loss in place of the TD loss (Dabney et al. 2017).

The network gives N quantiles theta_i(s, a) per action, at the midpoints tau_i = (2i + 1) / 2N. Q(s, a) is their
mean. The target of a transition is the N samples r + discount * theta_j(s', a*) of the target network at its
greedy action a* (by the online network's Q with double DQN). Every pair (i, j) has the error
u_ij = target_j - theta_i(s, a), and the loss of a transition is

    sum_i mean_j |tau_i - 1{u_ij < 0}| * Huber_kappa(u_ij) / kappa

(the paper's equation 10). Dopamine's JAX agent (google/dopamine, dopamine/jax/agents/quantile/quantile_agent.py,
`train`) computes the same sum and mean without the division by kappa, equal at its kappa of 1.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import ALLREDUCE_GROUPS, allreduce_groups, huber
from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.optimizers import make_optimizer


def quantile_midpoints(count: int) -> np.ndarray:
    """tau_i = (2i + 1) / 2N for i < N: the quantile levels whose values minimise the 1-Wasserstein distance to
    a distribution among N equal-weight Diracs (Dabney et al. 2017, Lemma 2)."""
    return ((np.arange(count) + 0.5) / count).astype(np.float32)


def quantile_huber_loss(quantiles, taus, targets, kappa: float):
    """Per transition (B,): the quantile Huber loss of `quantiles` (B, N) at levels `taus` (N,) or (B, N) against
    the target samples `targets` (B, N'): the sum over the N quantiles of the mean over the N' samples."""
    errors = targets[:, None, :] - quantiles[:, :, None]  # (B, N, N'): u_ij
    taus = tf.broadcast_to(taus, tf.shape(quantiles))[:, :, None]
    asymmetry = tf.abs(taus - tf.cast(errors < 0.0, errors.dtype))
    return tf.reduce_sum(tf.reduce_mean(asymmetry * huber(errors, kappa) / kappa, axis=2), axis=1)


class QuantileLearner(DQNLearner):
    """DQN's learner on networks of quantiles (B, actions, N). Its update returns, as "td_errors", each
    transition's quantile loss before the step: what prioritised replay takes its priorities from (Dopamine sets
    them to sqrt(loss + 1e-10), which --priority_alpha=0.5 with --priority_epsilon=1e-10 reproduces)."""

    def __init__(self, online: tf.keras.Model, target: tf.keras.Model, optimizer, double_dqn: bool, kappa: float,
                 xla: bool = False, fp16_allreduce: bool = False, groups=ALLREDUCE_GROUPS):
        self.kappa = float(kappa)
        self.taus = tf.constant(quantile_midpoints(online.output_shape[-1]))
        super().__init__(online, target, optimizer, double_dqn, xla=xla, fp16_allreduce=fp16_allreduce,
                         groups=groups)

    @classmethod
    def from_config(cls, config, online: tf.keras.Model, target: tf.keras.Model, world_size: int,
                    distributed: bool = True) -> "QuantileLearner":
        return cls(online, target, make_optimizer(config, world_size, distributed), config.double_dqn, config.kappa,
                   xla=config.xla, fp16_allreduce=config.fp16_allreduce, groups=allreduce_groups(config.elastic))

    def _targets(self, reward_t, discount_t, observation_t):
        """(B, N): r + discount * theta_j(s', a*), a* greedy on the mean of the target's (or, double, the
        online network's) quantiles."""
        quantiles_t = self._target_forward(observation_t, training=False)
        selector = self._online_forward(observation_t, training=False) if self.double_dqn else quantiles_t
        best_action = tf.argmax(tf.reduce_mean(selector, axis=-1), axis=-1, output_type=tf.int32)
        next_quantiles = tf.gather(quantiles_t, best_action, axis=1, batch_dims=1)
        return tf.stop_gradient(reward_t[:, None] + discount_t[:, None] * next_quantiles)

    def _loss(self, observation_tm1, action_tm1, target_tm1, weights):
        """(the weighted mean quantile loss, Q of the actions taken, each transition's loss, and the standard
        deviation of each taken action's return distribution: its N quantiles are N equally likely returns)."""
        quantiles_tm1 = self._online_forward(observation_tm1, training=True)
        taken = tf.gather(quantiles_tm1, action_tm1, axis=1, batch_dims=1)  # (B, N)
        per_transition = quantile_huber_loss(taken, self.taus, target_tm1, self.kappa)
        return (tf.reduce_mean(weights * per_transition), tf.reduce_mean(taken, axis=-1), per_transition,
                {"return_std": tf.math.reduce_std(tf.cast(taken, tf.float32), axis=-1)})
