"""The optimizers a Q-network trains with, and Horovod's DistributedOptimizer around them.

Adam is Keras'; RAdam (PQN's optimizer) and RMSprop with its epsilon outside the root (MinAtar's DQN, as PyTorch
has it) are written here, and so is the layer-wise trust ratio of LAMB (You et al. 2019), which any of them can
take (`--layer_adaptation`): each variable's step is rescaled to the learning rate times the variable's own
norm. `make_optimizer` builds the one a config names, with the step size scaled to the ranks.
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from hvd_dqn.agent.learner import ALLREDUCE_GROUPS


def trust_ratio(variable, direction):
    """LAMB's layer-wise trust ratio ||w|| / ||direction|| (You et al. 2019, "Large Batch Optimization for Deep
    Learning: Training BERT in 76 minutes", arXiv:1904.00962, Algorithm 2 with phi the identity and no weight
    decay), so that a variable's step is the learning rate times its own norm; 1 where either norm is 0 (a bias
    at its initial zeros then takes the base optimizer's step), as tfa.optimizers.LAMB has it."""
    weight_norm, direction_norm = tf.norm(variable), tf.norm(direction)
    usable = tf.logical_and(weight_norm > 0, direction_norm > 0)
    return tf.where(usable, weight_norm / tf.where(usable, direction_norm, 1.0), 1.0)


class LayerAdaptation:
    """The `layer_adaptation` setting of the optimizers below (kept in their config, from which Horovod's
    DistributedOptimizer rebuilds them): with it, each variable's step lr * direction becomes
    lr * trust_ratio * direction. Layer-wise adaptive step sizes (LARS, You et al. 2017, arXiv:1708.03888; LAMB)
    are what made batches of tens of thousands train at the small batch's sample efficiency in supervised
    learning: a larger step size, scaled with the batch, moves every layer by the same fraction of its norm
    instead of letting the layer with the largest gradients run away."""

    def __init__(self, *args, layer_adaptation: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.layer_adaptation = bool(layer_adaptation)

    def get_config(self):
        return dict(super().get_config(), layer_adaptation=self.layer_adaptation)

    def take_step(self, variable, lr, direction):
        if self.layer_adaptation:
            direction = trust_ratio(variable, direction) * direction
        variable.assign_sub(lr * direction)


class AdamMoments(LayerAdaptation, tf.keras.optimizers.Adam):
    """Keras' Adam with its moment updates written out, for the Adam variants below to take their own steps."""

    def moments(self, gradient, variable):
        """Updates the variable's first and second moments with `gradient`; returns (lr, step t, beta_2, m, v,
        beta_1^t, beta_2^t)."""
        if isinstance(gradient, tf.IndexedSlices):
            raise NotImplementedError(f"{type(self).__name__} handles dense gradients only")
        dtype = variable.dtype
        lr = tf.cast(self.learning_rate, dtype)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        key = self._var_key(variable)
        m = self._momentums[self._index_dict[key]]
        v = self._velocities[self._index_dict[key]]
        m.assign(beta_1 * m + (1 - beta_1) * gradient)
        v.assign(beta_2 * v + (1 - beta_2) * tf.square(gradient))
        return lr, step, beta_2, m, v, tf.pow(beta_1, step), tf.pow(beta_2, step)


# Registered so Horovod can rebuild them from their config (DistributedOptimizer uses from_config).
@tf.keras.utils.register_keras_serializable(package="hvd_dqn")
class Lamb(AdamMoments):
    """LAMB: Adam's bias-corrected direction m_hat / (sqrt(v_hat) + eps), each variable's step scaled by the
    trust ratio (`--optimizer=adam --layer_adaptation`). Without layer adaptation it is Adam with epsilon outside
    the bias correction (Keras' Adam folds sqrt(1 - beta_2^t) into epsilon)."""

    def update_step(self, gradient, variable):
        lr, _, _, m, v, beta_1_power, beta_2_power = self.moments(gradient, variable)
        m_hat, v_hat = m / (1 - beta_1_power), v / (1 - beta_2_power)
        self.take_step(variable, lr, m_hat / (tf.sqrt(v_hat) + self.epsilon))


@tf.keras.utils.register_keras_serializable(package="hvd_dqn")
class RectifiedAdam(AdamMoments):
    """RAdam (Liu et al. 2020, "On the Variance of the Adaptive Learning Rate and Beyond", arXiv:1908.03265):
    Adam whose adaptive step is rectified by the variance of its second-moment estimate, and which takes plain
    bias-corrected momentum steps while that estimate is too young (rho_t <= 5). The optimizer of PQN's reference
    code (purejaxql: optax.radam, whose threshold of 5 and epsilon outside the root this follows; CleanRL pqn.py:
    torch.optim.RAdam). Dense gradients only, as Q-networks have."""

    THRESHOLD = 5.0

    def update_step(self, gradient, variable):
        lr, step, beta_2, m, v, beta_1_power, beta_2_power = self.moments(gradient, variable)
        m_hat = m / (1 - beta_1_power)
        rho_infinity = 2 / (1 - beta_2) - 1
        rho = rho_infinity - 2 * step * beta_2_power / (1 - beta_2_power)
        rectifier = tf.sqrt(tf.maximum((rho - 4) * (rho - 2) * rho_infinity, 0.0)
                            / ((rho_infinity - 4) * (rho_infinity - 2) * rho))
        adaptive = rectifier * m_hat / (tf.sqrt(v / (1 - beta_2_power)) + self.epsilon)
        self.take_step(variable, lr, tf.where(rho > self.THRESHOLD, adaptive, m_hat))


@tf.keras.utils.register_keras_serializable(package="hvd_dqn")
class RootEpsilonRMSprop(LayerAdaptation, tf.keras.optimizers.RMSprop):
    """RMSprop with epsilon added to the square root, lr * g / (sqrt(v - m^2) + eps), as PyTorch's RMSprop
    and so MinAtar's DQN (centred, eps 0.01); Keras' RMSprop adds it under the root, lr * g / sqrt(v - m^2 +
    eps), which for the same eps is a different optimizer. Dense gradients and no momentum, as DQN uses it."""

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices) or self.momentum > 0:
            raise NotImplementedError("RootEpsilonRMSprop handles dense gradients without momentum only")
        lr = tf.cast(self.learning_rate, variable.dtype)
        key = self._var_key(variable)
        velocity = self._velocities[self._index_dict[key]]
        velocity.assign(self.rho * velocity + (1 - self.rho) * tf.square(gradient))
        second_moment = velocity
        if self.centered:
            average = self._average_gradients[self._index_dict[key]]
            average.assign(self.rho * average + (1 - self.rho) * gradient)
            # v - m^2 >= 0 in exact arithmetic (both are averages with the same weights); rounding may not be.
            second_moment = tf.maximum(velocity - tf.square(average), 0.0)
        denominator = tf.sqrt(second_moment) + self.epsilon
        if self.layer_adaptation:
            self.take_step(variable, lr, gradient / denominator)
        else:  # lr * g first, as before layer adaptation existed, so runs repeat bit for bit
            variable.assign_sub(lr * gradient / denominator)


def make_optimizer(learning_rate: float, adam_epsilon: float, max_grad_norm: float, world_size: int,
                   scale_lr_by_workers: bool, lr_warmup_updates: int, distributed: bool = True,
                   elastic: bool = False, fp16_allreduce: bool = False, mixed_precision: bool = False,
                   optimizer: str = "adam", rmsprop_rho: float = 0.95, rmsprop_epsilon: float = 0.01,
                   rmsprop_centered: bool = True, lr_scale_rule: str = "linear",
                   learning_rate_end: Optional[float] = None, lr_decay_updates: int = 0,
                   layer_adaptation: bool = False):
    """Adam (or, with optimizer="rmsprop", RootEpsilonRMSprop; "radam", RectifiedAdam), wrapped in Horovod's
    DistributedOptimizer (unless distributed=False, for comparisons). With `layer_adaptation` each variable's step
    is scaled by LAMB's trust ratio (Adam then is `Lamb`).

    `max_grad_norm` clips the global norm of the gradient after it has been averaged over ranks (Keras
    clips in apply_gradients, which runs after DistributedOptimizer's allreduce), so all ranks clip alike.
    With `elastic` the scaled rate is a schedule even for one rank, so `rescale_learning_rate` can follow
    the world as workers leave and join. With `learning_rate_end` the rate (scaled or not) decays linearly
    to it, times the same scale, over `lr_decay_updates` updates.

    With `mixed_precision` the result is a Keras LossScaleOptimizer (dynamic loss scaling) around Adam, not
    a DistributedOptimizer: Horovod 0.28.1 cannot wrap a Keras 2.11+ LossScaleOptimizer (TypeError, horovod
    issue #3807), and a LossScaleOptimizer around a DistributedOptimizer skips the allreduce (replicas
    diverged when tried here). The learner then averages the gradients with hvd.DistributedGradientTape.
    """
    from hvd_dqn.agent.schedules import WarmupToScaledLearningRate, learning_rate_scale

    rate = learning_rate
    scaled, decaying = scale_lr_by_workers and (world_size > 1 or elastic), learning_rate_end is not None
    if scaled or decaying:
        rate = WarmupToScaledLearningRate(
            learning_rate, learning_rate_scale(world_size, lr_scale_rule) if scaled else 1.0,
            lr_warmup_updates if scaled else 0,
            end_fraction=learning_rate_end / learning_rate if decaying else 1.0,
            decay_updates=lr_decay_updates if decaying else 0)
    clip = max_grad_norm or None
    if optimizer == "adam" and layer_adaptation:
        built = Lamb(learning_rate=rate, epsilon=adam_epsilon, global_clipnorm=clip, layer_adaptation=True)
    elif optimizer == "adam":
        built = tf.keras.optimizers.Adam(learning_rate=rate, epsilon=adam_epsilon, global_clipnorm=clip)
    elif optimizer == "radam":
        built = RectifiedAdam(learning_rate=rate, epsilon=adam_epsilon, global_clipnorm=clip,
                              layer_adaptation=layer_adaptation)
    elif optimizer == "rmsprop":
        built = RootEpsilonRMSprop(learning_rate=rate, rho=rmsprop_rho, epsilon=rmsprop_epsilon,
                                   centered=rmsprop_centered, global_clipnorm=clip, layer_adaptation=layer_adaptation)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected adam, radam or rmsprop")
    if mixed_precision:
        return tf.keras.mixed_precision.LossScaleOptimizer(built)
    if not distributed:
        return built
    return distributed_optimizer(built, fp16_allreduce, grouped=not elastic)


def distributed_optimizer(optimizer, fp16_allreduce: bool = False, grouped: bool = True):
    """Horovod's DistributedOptimizer around `optimizer`. With `fp16_allreduce` the gradients travel as
    float16 (hvd.Compression.fp16: half the bytes on the wire, about 3 decimal digits) and are averaged and
    applied in float32."""
    import horovod.tensorflow.keras as hvd_keras

    compression = hvd_keras.Compression.fp16 if fp16_allreduce else hvd_keras.Compression.none
    return hvd_keras.DistributedOptimizer(optimizer, compression=compression,
                                          groups=ALLREDUCE_GROUPS if grouped else None)


def rescale_learning_rate(optimizer, world_size: int, rule: str = "linear") -> bool:
    """Sets a --scale_lr_by_workers schedule to `world_size` ranks; returns whether there was one.

    DistributedOptimizer rebuilds the optimizer from its config, so the schedule to change is the one the
    wrapped optimizer holds, not the one `make_optimizer` created. Keras 2.11+'s `optimizer.learning_rate`
    returns the schedule's current value, not the schedule, hence the private `_learning_rate`."""
    from hvd_dqn.agent.schedules import WarmupToScaledLearningRate, learning_rate_scale

    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # --mixed_precision's LossScaleOptimizer
    schedule = getattr(optimizer, "_learning_rate", None)
    if isinstance(schedule, WarmupToScaledLearningRate):
        schedule.set_scale(learning_rate_scale(world_size, rule))
        return True
    return False


def current_learning_rate(optimizer) -> float:
    rate = optimizer.learning_rate
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(optimizer.iterations))
    return float(tf.keras.backend.get_value(rate))
