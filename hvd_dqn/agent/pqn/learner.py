"""PQN, parallelised Q-learning (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning",
arXiv:2407.04811): Q-learning without a replay memory and without a target network. Many envs collect a short
rollout with the current network (epsilon-greedy); Q(lambda) returns are computed over it; the network then
learns from the rollout for a few passes of minibatches and the next rollout is collected. LayerNorm in the
network (`hvd_dqn.agent.networks`, `layer_norm`) is what keeps the bootstrapped targets from diverging without
a target network.

Data-parallel under Horovod: each rank collects its share of the job's envs, computes the returns of its own
rollout (they need nothing from the other ranks) and contributes an equal share of every minibatch; the
gradient of each minibatch is averaged over the ranks by DistributedOptimizer, so N ranks run one rank's
algorithm on the same global rollout and minibatches.

The reference implementations read for this one: mttga/purejaxql (`pqn_gymnax.py`, `pqn_minatar.py`,
`pqn_atari.py`) and vwxyzjn/cleanrl (`cleanrl/pqn.py`, `cleanrl/pqn_atari_envpool.py`).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import ALLREDUCE_GROUPS, DistributedUpdate, allreduce_groups
from hvd_dqn.agent.optimizers import make_optimizer


def q_lambda_returns(reward: np.ndarray, discount: np.ndarray, ended: np.ndarray, next_value: np.ndarray,
                     gamma: float, q_lambda: float) -> np.ndarray:
    """Peng's Q(lambda) returns of a rollout, arrays (steps, envs), computed backwards from its last step:

        G_t = r_t + gamma * d_t * ((1 - lambda) * V_t + lambda * G_t+1)    while the episode goes on,
        G_t = r_t + gamma * d_t * V_t                                      at its end and at the rollout's end,

    with V_t = max_a Q(s_t+1, a) of the step's true next observation (the episode's last one where it ended)
    and d_t the learning discount: 0 after a termination, so G_t = r_t there, and 1 after a truncation, which
    bootstraps from the last observation instead of passing into the next episode's returns. purejaxql's
    `_get_target` is the same recursion (its environments end episodes by termination only); CleanRL's pqn.py
    lets lambda * G_t+1 run on across an episode's end."""
    steps = reward.shape[0]
    returns = np.empty_like(reward, dtype=np.float32)
    following = next_value[-1]
    for t in reversed(range(steps)):
        goes_on = ~ended[t] & (t < steps - 1)
        bootstrap = np.where(goes_on, (1.0 - q_lambda) * next_value[t] + q_lambda * following, next_value[t])
        returns[t] = reward[t] + gamma * discount[t] * bootstrap
        following = returns[t]
    return returns


class PQNLearner(DistributedUpdate):
    """The online Q-network and its (distributed) optimizer; no target network. `update(observation, action,
    target)` is one synchronous step on a rank's share of a minibatch, `max_q(observations)` the bootstrap
    values of a rollout. The learner's state (`checkpoint_items`) is what a checkpoint stores."""

    def __init__(self, online: tf.keras.Model, optimizer, loss: str = "mse", huber_delta: float = 1.0,
                 xla: bool = False, fp16_allreduce: bool = False, groups: Optional[int] = ALLREDUCE_GROUPS):
        self._forward = tf.function(online, jit_compile=True) if xla else online
        super().__init__(online, optimizer, loss, huber_delta, fp16_allreduce, groups)

    @classmethod
    def from_config(cls, config, online: tf.keras.Model, world_size: int, distributed: bool = True) -> "PQNLearner":
        """The learner of a PQN rank of a job of `world_size` ranks: the online network and the config's
        optimizer (in Horovod's DistributedOptimizer unless distributed=False), no target."""
        return cls(online, make_optimizer(config, world_size, distributed), config.loss, config.huber_delta,
                   xla=config.xla, fp16_allreduce=config.fp16_allreduce, groups=allreduce_groups(config.elastic))

    @property
    def synchronized_variables(self) -> List[tf.Variable]:
        """Everything that must be equal on all ranks, in a fixed order (for the broadcast from rank 0)."""
        return list(self.online.variables) + list(self.optimizer.variables) + [self.num_updates]

    def checkpoint_items(self) -> Dict[str, object]:
        return {"online": self.online, "optimizer": self.optimizer, "num_updates": self.num_updates}

    def update(self, observation: np.ndarray, action: np.ndarray, target: np.ndarray) -> Dict[str, float]:
        metrics = self._update(observation, action, target)
        return {"td_loss": float(metrics["td_loss"]), "q_mean": float(metrics["q_mean"])}

    # No AutoGraph: the update has no Python control flow on tensors, and converting Horovod's optimizer code
    # took about 4 s of the first update (TF 2.18), a tenth of a CartPole run.
    @tf.function(autograph=False)
    def _update(self, observation, action, target):
        with tf.GradientTape() as tape:
            q = self._forward(observation, training=True)
            q_taken = tf.gather(q, action, axis=-1, batch_dims=1)
            loss = tf.reduce_mean(self._td_loss(tf.stop_gradient(target) - q_taken))
            scaled_loss = self._scaled(loss)
        self._minimize(loss, tape, scaled_loss)
        return {"td_loss": loss, "q_mean": tf.reduce_mean(q_taken)}

    def max_q(self, observations: np.ndarray, chunk: int = 1024) -> np.ndarray:
        """max_a Q(s, a) for a (steps, envs, ...) array of observations, in chunks of at most `chunk`."""
        flat = observations.reshape((-1,) + observations.shape[2:])
        values = [self._max_q(tf.convert_to_tensor(flat[start:start + chunk]))
                  for start in range(0, len(flat), chunk)]
        return np.concatenate([value.numpy() for value in values]).reshape(observations.shape[:2])

    @tf.function(reduce_retracing=True, autograph=False)
    def _max_q(self, observation):
        return tf.reduce_max(self._forward(observation, training=False), axis=-1)
