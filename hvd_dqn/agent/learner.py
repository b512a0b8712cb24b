"""The DQN learner: online and target Q-networks, the TD loss and the synchronous data-parallel update.

Every rank computes the loss on its own minibatch; `hvd.DistributedOptimizer` averages the gradients over
ranks with ring-allreduce inside `minimize(loss, var_list, tape=tape)`, so every rank applies the same
update and the replicas stay identical. The gradient must be computed through that call: computing it
with the tape and calling `apply_gradients` directly skips the allreduce in Horovod 0.28 with Keras 2.11+,
and each rank would silently train alone (tests/test_distributed.py proves the replicas agree only with it).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf

from hvd_dqn.replay.memory import FrameBatch

# All gradients of an update cross the allreduce as one group, so every update fuses the same tensors into
# the same buffer. Left to Horovod's tensor fusion, which tensors share a buffer depends on when each is
# ready, so an element's sum over 3 or more ranks is added in an order that changes from run to run:
# measured here, two 4-rank CartPole runs with one seed parted ways 480 env steps after learning started;
# with one group they repeat bit for bit (tests/test_distributed.py). With 2 ranks the order cannot matter.
# Not under --elastic: a grouped allreduce traced before a change of world fails once Horovod re-initialises
# (tests/test_elastic.py's killed worker), and a run whose world changes cannot repeat bit for bit anyway.
ALLREDUCE_GROUPS = 1


def td_targets(reward_t, discount_t, q_target_t, q_online_t=None):
    """Q-learning targets reward_t + discount_t * Q_target(s_t, a*), shape (B,).

    The replay memory supplies reward_t as the (n-step) discounted reward and discount_t as the whole factor
    on the bootstrap: gamma^k after k steps, 0 after a termination (only the rewards remain). After a
    truncation discount_t is gamma^k and the target bootstraps from the episode's true last observation.
    a* = argmax_a Q_target(s_t, a) (Mnih et al. 2015), or argmax_a Q_online(s_t, a) when `q_online_t` is
    given: double DQN (van Hasselt et al. 2016), which decouples choosing a* from valuing it and so removes
    most of Q-learning's overestimation.
    """
    selector = q_target_t if q_online_t is None else q_online_t
    best_action = tf.argmax(selector, axis=-1, output_type=tf.int32)
    bootstrap = tf.gather(q_target_t, best_action, axis=-1, batch_dims=1)
    return reward_t + discount_t * bootstrap


def td_loss(td_error, loss: str, huber_delta: float = 1.0):
    """The per-transition loss of a TD error: "huber" (Mnih et al. 2015 clip the error's gradient at delta)
    or "mse", the squared error without a factor 1/2, as Dopamine's JAX DQN (dopamine/jax/losses.py)."""
    if loss == "mse":
        return tf.square(td_error)
    if loss == "huber":
        return huber(td_error, huber_delta)
    raise ValueError(f"unknown TD loss {loss!r}; expected huber or mse")


def huber(x, delta: float):
    """Huber loss, elementwise: quadratic within |x| <= delta, linear beyond (Mnih et al. 2015 clip the TD error)."""
    abs_x = tf.abs(x)
    quadratic = tf.minimum(abs_x, delta)
    return 0.5 * quadratic**2 + delta * (abs_x - quadratic)


class DQNLearner:
    """Owns the online network, the target network and the (distributed) optimizer.

    `update(batch)` performs one synchronous gradient step on all ranks and returns its metrics;
    `sync_target(tau)` copies the online weights into the target network, or averages them in. The learner's
    whole state (`checkpoint_items`) is what a checkpoint stores.
    """

    def __init__(self, online: tf.keras.Model, target: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer,
                 double_dqn: bool, huber_delta: float = 1.0, xla: bool = False, fp16_allreduce: bool = False,
                 loss: str = "huber", grouped_allreduce: bool = True):
        self.online = online
        self.target = target
        # --xla: the networks' forward passes (and so their gradients) are compiled by XLA; the gradient
        # allreduce stays outside, since Horovod's collectives are not XLA ops here.
        self._online_forward = tf.function(online, jit_compile=True) if xla else online
        self._target_forward = tf.function(target, jit_compile=True) if xla else target
        self.optimizer = optimizer
        # --mixed_precision: the loss is scaled (float16 gradients would underflow) and the gradients are
        # averaged by Horovod's DistributedGradientTape instead of a DistributedOptimizer (see make_optimizer).
        self.loss_scaling = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
        self.fp16_allreduce = fp16_allreduce
        self.allreduce_groups = ALLREDUCE_GROUPS if grouped_allreduce else None
        self.double_dqn = bool(double_dqn)
        self.huber_delta = float(huber_delta)
        td_loss(tf.zeros(1), loss)  # an unknown loss fails here, not inside the first traced update
        self.loss = loss
        self.num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="num_updates")
        # Create the optimizer's slot variables now, so they exist to be broadcast and checkpointed before
        # the first update.
        self.optimizer.build(self.online.trainable_variables)
        self.sync_target()

    @property
    def synchronized_variables(self) -> List[tf.Variable]:
        """Everything that must be equal on all ranks, in a fixed order (for the broadcast from rank 0)."""
        return (list(self.online.variables) + list(self.target.variables) + list(self.optimizer.variables)
                + [self.num_updates])

    def checkpoint_items(self) -> Dict[str, object]:
        return {"online": self.online, "target": self.target, "optimizer": self.optimizer,
                "num_updates": self.num_updates}

    def update(self, batch) -> Dict[str, object]:
        """One synchronous step on a Batch or a FrameBatch; returns {"td_loss", "q_mean"} as floats and
        "td_errors", the (B,) TD errors before the step (prioritised replay's new priorities). With
        batch.weights (importance sampling), each transition's loss is weighted before the mean."""
        metrics = _on_batch(batch, self._update, self._update_from_frames)
        return {"td_loss": float(metrics["td_loss"]), "q_mean": float(metrics["q_mean"]),
                "td_errors": metrics["td_errors"].numpy()}

    @tf.function
    def _update(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights):
        return self._step(observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights)

    @tf.function
    def _update_from_frames(self, frames, next_offset, action_tm1, reward_t, discount_t, weights):
        observation_tm1, observation_t = self._stacks(frames, next_offset)
        return self._step(observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights)

    def _stacks(self, frames, next_offset):
        """A FrameBatch's two stacks of observations. Only the compact uint8 frames cross to the device; both
        stacks are cut from them there."""
        stack = self.online.input_shape[1]
        return frames[:, :stack], tf.gather(frames, next_offset[:, None] + tf.range(stack)[None, :], batch_dims=1)

    def _step(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights):
        """The update's graph: (double-)DQN targets, the weighted TD loss, the distributed minimize."""
        target_tm1 = self._targets(reward_t, discount_t, observation_t)
        with tf.GradientTape() as tape:
            loss, q_tm1_taken, td_error = self._loss(observation_tm1, action_tm1, target_tm1, weights)
            scaled_loss = self.optimizer.get_scaled_loss(loss) if self.loss_scaling else None
        minimize_distributed(self.optimizer, loss, scaled_loss, tape, self.online.trainable_variables,
                             self.fp16_allreduce, self.allreduce_groups)
        self.num_updates.assign_add(1)
        return {"td_loss": loss, "q_mean": tf.reduce_mean(q_tm1_taken), "td_errors": td_error}

    def _targets(self, reward_t, discount_t, observation_t):
        q_target_t = self._target_forward(observation_t, training=False)
        q_online_t = self._online_forward(observation_t, training=False) if self.double_dqn else None
        return tf.stop_gradient(td_targets(reward_t, discount_t, q_target_t, q_online_t))

    def _loss(self, observation_tm1, action_tm1, target_tm1, weights):
        """(the weighted mean TD loss, Q of the actions taken, the TD errors), recorded on the caller's tape."""
        q_tm1 = self._online_forward(observation_tm1, training=True)
        q_tm1_taken = tf.gather(q_tm1, action_tm1, axis=-1, batch_dims=1)
        td_error = target_tm1 - q_tm1_taken
        return tf.reduce_mean(weights * td_loss(td_error, self.loss, self.huber_delta)), q_tm1_taken, td_error

    def loss_gradient(self, batch) -> np.ndarray:
        """The gradient of the update's loss on `batch` at the current weights, all variables flattened into
        one float64 vector: this rank's alone (no allreduce, no clipping, no step). What the gradient noise
        scale (hvd_dqn.tools.noise_scale) is measured from."""
        gradients = _on_batch(batch, self._gradient, self._frames_gradient)
        return np.concatenate([np.ravel(gradient.numpy()).astype(np.float64) for gradient in gradients])

    @tf.function
    def _frames_gradient(self, frames, next_offset, action_tm1, reward_t, discount_t, weights):
        observation_tm1, observation_t = self._stacks(frames, next_offset)
        return self._gradient(observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights)

    @tf.function
    def _gradient(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights):
        target_tm1 = self._targets(reward_t, discount_t, observation_t)
        with tf.GradientTape() as tape:
            loss, _, _ = self._loss(observation_tm1, action_tm1, target_tm1, weights)
        return tape.gradient(loss, self.online.trainable_variables)

    def sync_target(self, tau: float = 1.0) -> None:
        """Target <- online (tau = 1, Mnih et al. 2015), or target <- tau online + (1 - tau) target: Polyak
        averaging (Lillicrap et al. 2016), which moves the target smoothly and steadies learning."""
        if tau >= 1.0:
            self._copy_target()  # an exact copy, bit for bit (signed zeros included)
        else:
            self._blend_target(tf.constant(tau, tf.float32))

    @tf.function
    def _copy_target(self) -> None:
        for target_variable, online_variable in zip(self.target.variables, self.online.variables):
            target_variable.assign(online_variable)

    @tf.function
    def _blend_target(self, tau) -> None:
        for target_variable, online_variable in zip(self.target.variables, self.online.variables):
            target_variable.assign(tau * online_variable + (1.0 - tau) * target_variable)


def _on_batch(batch, on_observations, on_frames):
    """Calls `on_frames` with a FrameBatch's compact frames, or `on_observations` with a Batch's two observations,
    and the transitions' loss weights (batch.weights under prioritised replay, else ones)."""
    weights = batch.weights if batch.weights is not None else np.ones(len(batch.action_tm1), np.float32)
    if isinstance(batch, FrameBatch):
        return on_frames(batch.frames, batch.next_offset, batch.action_tm1, batch.reward_t, batch.discount_t, weights)
    return on_observations(batch.observation_tm1, batch.action_tm1, batch.reward_t, batch.discount_t,
                           batch.observation_t, weights)


def minimize_distributed(optimizer, loss, scaled_loss, tape, variables, fp16_allreduce: bool, allreduce_groups):
    """Inside an update's graph: one step of `optimizer` on `loss`, its gradient averaged over the ranks.

    Horovod: `minimize(..., tape=)` is the path on which DistributedOptimizer allreduces the gradients; computing
    them with the tape and calling `apply_gradients` would train each rank alone. With --mixed_precision
    (`scaled_loss` given) the optimizer is a LossScaleOptimizer, which Horovod cannot wrap: the gradients of the
    scaled loss are averaged by Horovod's DistributedGradientTape instead."""
    if scaled_loss is None:
        optimizer.minimize(loss, variables, tape=tape)
        return
    import horovod.tensorflow as hvd

    compression = hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none
    scaled_gradients = hvd.DistributedGradientTape(tape, compression=compression, groups=allreduce_groups
                                                   ).gradient(scaled_loss, variables)
    # Every rank holds the same averaged gradients, so all skip a non-finite step and change the loss scale alike.
    optimizer.apply_gradients(zip(optimizer.get_unscaled_gradients(scaled_gradients), variables))
