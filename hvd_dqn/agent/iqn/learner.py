"""IQN's learner: DQN's online and target networks and distributed update, on implicit quantile networks.

For each transition it draws N levels tau for the online network, N' levels tau' for the target's samples and K
levels for choosing the target's action (uniform in [0, 1]). The target samples are r + discount * Z_tau'_j(s', a*)
with a* = argmax_a mean_k Z_tau_k(s', a) (of the target network, or the online one with --double_dqn), and the loss
is the quantile Huber loss of the N predicted values at their levels against the N' samples, summed over the N and
averaged over the N' (Dabney et al. 2018, equation 3; Dopamine's `train` in
dopamine/jax/agents/implicit_quantile/implicit_quantile_agent.py, which divides by kappa as the paper does).

The levels come from a stateless generator seeded by the run's seed, the rank and the update count, so a run
repeats them exactly, a resume continues them, and ranks draw levels of their own.
"""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import ALLREDUCE_GROUPS, allreduce_groups
from hvd_dqn.agent.dqn.learner import DQNLearner
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.agent.qrdqn.learner import quantile_huber_loss

# Which draw of an update a stateless seed is for.
_ONLINE_LEVELS, _TARGET_LEVELS, _ACTION_LEVELS = 0, 1, 2


class ImplicitQuantileLearner(DQNLearner):
    """DQN's learner on networks of [observations, taus] -> (B, taus, actions). Its update returns, as
    "td_errors", each transition's quantile loss before the step (what prioritised replay takes its priorities
    from)."""

    def __init__(self, online: tf.keras.Model, target: tf.keras.Model, optimizer, double_dqn: bool, kappa: float,
                 samples=(64, 64, 32), seed: int = 0, xla: bool = False, fp16_allreduce: bool = False,
                 groups=ALLREDUCE_GROUPS):
        self.kappa = float(kappa)
        self.num_tau, self.num_tau_prime, self.num_action_levels = samples
        self.seed = int(seed)
        super().__init__(online, target, optimizer, double_dqn, xla=xla, fp16_allreduce=fp16_allreduce,
                         groups=groups)

    @classmethod
    def from_config(cls, config, online: tf.keras.Model, target: tf.keras.Model, world_size: int,
                    distributed: bool = True) -> "ImplicitQuantileLearner":
        """The learner of a config; its levels' seed is the run's (a rank's agent gives it its own)."""
        samples = (config.num_tau_samples, config.num_tau_prime_samples, config.num_quantile_samples)
        return cls(online, target, make_optimizer(config, world_size, distributed), config.double_dqn, config.kappa,
                   samples, seed=config.seed, xla=config.xla, fp16_allreduce=config.fp16_allreduce,
                   groups=allreduce_groups(config.elastic))

    def _levels(self, batch_size, count: int, draw: int):
        """(B, count) levels in [0, 1), the same for the same seed, update and draw."""
        seed = tf.stack([tf.constant(self.seed, tf.int64), self.num_updates * 3 + draw])
        return tf.random.stateless_uniform([batch_size, count], seed=seed)

    def _targets(self, reward_t, discount_t, observation_t):
        """(B, N'): r + discount * Z_tau'(s', a*)."""
        batch_size = tf.shape(reward_t)[0]
        selector = self._online_forward if self.double_dqn else self._target_forward
        action_values = selector([observation_t, self._levels(batch_size, self.num_action_levels, _ACTION_LEVELS)],
                                 training=False)
        best_action = tf.argmax(tf.reduce_mean(action_values, axis=1), axis=-1, output_type=tf.int32)
        samples = self._target_forward([observation_t, self._levels(batch_size, self.num_tau_prime, _TARGET_LEVELS)],
                                       training=False)
        next_values = tf.gather(samples, best_action, axis=2, batch_dims=1)  # (B, N')
        return tf.stop_gradient(reward_t[:, None] + discount_t[:, None] * next_values)

    def _loss(self, observation_tm1, action_tm1, target_tm1, weights):
        """(the weighted mean quantile loss, Q of the actions taken, each transition's loss, and the standard
        deviation of each taken action's return distribution, estimated from its values at the N uniform levels)."""
        taus = self._levels(tf.shape(action_tm1)[0], self.num_tau, _ONLINE_LEVELS)
        values = self._online_forward([observation_tm1, taus], training=True)
        taken = tf.gather(values, action_tm1, axis=2, batch_dims=1)  # (B, N)
        per_transition = quantile_huber_loss(taken, taus, target_tm1, self.kappa)
        return (tf.reduce_mean(weights * per_transition), tf.reduce_mean(taken, axis=-1), per_transition,
                {"return_std": tf.math.reduce_std(tf.cast(taken, tf.float32), axis=-1)})
