"""DQN's learner: online and target Q-networks, the (double) DQN targets and the TD loss on a minibatch,
made as one synchronous data-parallel update (`hvd_dqn.agent.data_parallel_update`)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import ALLREDUCE_GROUPS, DistributedUpdate, allreduce_groups
from hvd_dqn.agent.dqn.settings import double_dqn
from hvd_dqn.agent.noisy import is_noisy, tiled_seed
from hvd_dqn.agent.optimizers import make_optimizer
from hvd_dqn.memories.replay import FrameBatch


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


class DQNLearner(DistributedUpdate):
    """The online network, the target network and the (distributed) optimizer.

    `update(batch)` performs one synchronous gradient step on all ranks and returns its metrics;
    `sync_target(tau)` copies the online weights into the target network, or averages them in. The learner's
    whole state (`checkpoint_items`) is what a checkpoint stores.

    Noisy networks (`hvd_dqn.agent.noisy`) get fresh noise at every update, keyed by `seed` and the update count:
    one draw for the loss's forward pass, another for the target's side (the target network, and the online one
    choosing the action with double DQN), as Dopamine's full Rainbow splits its key into rng and rng1.
    """

    seed = 0  # keys the learner's random draws; a rank's agent sets its own (the run's seed and the rank)

    def __init__(self, online: tf.keras.Model, target: tf.keras.Model, optimizer, double_dqn: bool,
                 huber_delta: float = 1.0, xla: bool = False, fp16_allreduce: bool = False, loss: str = "huber",
                 groups: Optional[int] = ALLREDUCE_GROUPS):
        self.target = target
        # --xla: the networks' forward passes (and so their gradients) are compiled by XLA; the gradient
        # allreduce stays outside, since Horovod's collectives are not XLA ops here.
        self._online_forward = tf.function(online, jit_compile=True) if xla else online
        self._target_forward = tf.function(target, jit_compile=True) if xla else target
        if is_noisy(online):
            self._online_forward = self._with_noise(self._online_forward)
            self._target_forward = self._with_noise(self._target_forward)
        self.double_dqn = bool(double_dqn)
        super().__init__(online, optimizer, loss, huber_delta, fp16_allreduce, groups)
        self.sync_target()

    def _with_noise(self, forward):
        """`forward` of a noisy network as a function of the observations: the loss's pass (training=True) with
        this update's first noise, the target side's passes with its second."""
        def noisy_forward(observation, training: bool):
            seed = tf.stack([tf.constant(self.seed, tf.int64), self.num_updates * 2 + (0 if training else 1)])
            return forward([observation, tiled_seed(seed, tf.shape(observation)[0])], training=training)
        return noisy_forward

    @classmethod
    def from_config(cls, config, online: tf.keras.Model, target: tf.keras.Model, world_size: int,
                    distributed: bool = True) -> "DQNLearner":
        """The learner a rank of a job of `world_size` ranks trains with: the config's optimizer and step size at
        that many ranks, its loss and targets, and Horovod's DistributedOptimizer around the optimizer (unless
        distributed=False: the same update without the allreduce, which the measuring commands compare with)."""
        return cls(online, target, make_optimizer(config, world_size, distributed), double_dqn(config),
                   config.huber_delta, xla=config.xla, fp16_allreduce=config.fp16_allreduce, loss=config.loss,
                   groups=allreduce_groups(config.elastic))

    @property
    def synchronized_variables(self) -> List[tf.Variable]:
        """Everything that must be equal on all ranks, in a fixed order (for the broadcast from rank 0)."""
        return (list(self.online.variables) + list(self.target.variables) + list(self.optimizer.variables)
                + [self.num_updates])

    def checkpoint_items(self) -> Dict[str, object]:
        return {"online": self.online, "target": self.target, "optimizer": self.optimizer,
                "num_updates": self.num_updates}

    def update(self, batch) -> Dict[str, object]:
        """One synchronous step on a Batch or a FrameBatch; returns {"td_loss", "q_mean"} as floats, with the
        minibatch means of whatever else the learner's loss reports per transition (a distributional learner's
        "return_std"), and "td_errors", the (B,) TD errors before the step (prioritised replay's new priorities).
        With batch.weights (importance sampling), each transition's loss is weighted before the mean."""
        metrics = _on_batch(batch, self._update, self._update_from_frames)
        return {**{name: float(value) for name, value in metrics.items() if name != "td_errors"},
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
        stack = self.online.inputs[0].shape[1]  # the frames per stack (a network may take more inputs)
        return frames[:, :stack], tf.gather(frames, next_offset[:, None] + tf.range(stack)[None, :], batch_dims=1)

    def _step(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights):
        """The update's graph: (double-)DQN targets, the weighted TD loss, the distributed minimize."""
        target_tm1 = self._targets_of(observation_tm1, action_tm1, reward_t, discount_t, observation_t)
        with tf.GradientTape() as tape:
            loss, q_tm1_taken, td_error, more_metrics = self._loss(observation_tm1, action_tm1, target_tm1, weights)
            scaled_loss = self._scaled(loss)
        self._minimize(loss, tape, scaled_loss)
        return {"td_loss": loss, "q_mean": tf.reduce_mean(q_tm1_taken), "td_errors": td_error,
                **{name: tf.reduce_mean(values) for name, values in more_metrics.items()}}

    def _targets_of(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t):
        """The targets of a minibatch's transitions. DQN's and the distributional agents' look ahead only
        (`_targets`); a learner whose target also depends on the transition's own state and action (Munchausen
        DQN's bonus for the action taken) overrides this."""
        return self._targets(reward_t, discount_t, observation_t)

    def _targets(self, reward_t, discount_t, observation_t):
        q_target_t = self._target_forward(observation_t, training=False)
        q_online_t = self._online_forward(observation_t, training=False) if self.double_dqn else None
        return tf.stop_gradient(td_targets(reward_t, discount_t, q_target_t, q_online_t))

    def _loss(self, observation_tm1, action_tm1, target_tm1, weights):
        """(the weighted mean TD loss, Q of the actions taken, the TD errors, further metrics per transition by
        name: none for DQN), recorded on the caller's tape."""
        q_tm1 = self._online_forward(observation_tm1, training=True)
        q_tm1_taken = tf.gather(q_tm1, action_tm1, axis=-1, batch_dims=1)
        td_error = target_tm1 - q_tm1_taken
        return tf.reduce_mean(weights * self._td_loss(td_error)), q_tm1_taken, td_error, {}

    def loss_gradient(self, batch) -> np.ndarray:
        """The gradient of the update's loss on `batch` at the current weights, all variables flattened into
        one float64 vector: this rank's alone (no allreduce, no clipping, no step). What the gradient noise
        scale (hvd_dqn.plan.noise_scale) is measured from."""
        gradients = _on_batch(batch, self._gradient, self._frames_gradient)
        return np.concatenate([np.ravel(gradient.numpy()).astype(np.float64) for gradient in gradients])

    @tf.function
    def _frames_gradient(self, frames, next_offset, action_tm1, reward_t, discount_t, weights):
        observation_tm1, observation_t = self._stacks(frames, next_offset)
        return self._gradient(observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights)

    @tf.function
    def _gradient(self, observation_tm1, action_tm1, reward_t, discount_t, observation_t, weights):
        target_tm1 = self._targets_of(observation_tm1, action_tm1, reward_t, discount_t, observation_t)
        with tf.GradientTape() as tape:
            loss = self._loss(observation_tm1, action_tm1, target_tm1, weights)[0]
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
