"""The optimizers a Q-network trains with, and Horovod's DistributedOptimizer around them.

Adam is Keras'; RAdam (PQN's optimizer) and RMSprop with its epsilon outside the root (MinAtar's DQN, as PyTorch
has it) are written here, and so is the layer-wise trust ratio of LAMB (You et al. 2019), which any of them can
take (`--layer_adaptation`): each variable's step is rescaled to the learning rate times the variable's own
norm. `make_optimizer` builds the one a config names, with the step size the ranks train at
(`hvd_dqn.rank_split.learning_rate_at`, the one rule for it) as a `WarmupToScaledLearningRate` where it changes.
"""
from __future__ import annotations

import tensorflow as tf

from hvd_dqn.agent.data_parallel_update import allreduce_groups
from hvd_dqn.rank_split import LearningRateAtRanks, learning_rate_at


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


def make_optimizer(config, world_size: int, distributed: bool = True):
    """The optimizer a TrainConfig names (--optimizer: Adam, RectifiedAdam or RootEpsilonRMSprop; Adam with
    --layer_adaptation is `Lamb`), at the step size a rank of `world_size` trains with (`learning_rate_schedule`),
    wrapped in Horovod's DistributedOptimizer (unless distributed=False, for comparisons).

    --max_grad_norm clips the global norm of the gradient after it has been averaged over ranks (Keras clips in
    apply_gradients, which runs after DistributedOptimizer's allreduce), so all ranks clip alike.

    With --mixed_precision the result is a Keras LossScaleOptimizer (dynamic loss scaling) around it, not a
    DistributedOptimizer: Horovod 0.28.1 cannot wrap a Keras 2.11+ LossScaleOptimizer (TypeError, horovod issue
    #3807), and a LossScaleOptimizer around a DistributedOptimizer skips the allreduce (replicas diverged when
    tried here). The learner then averages the gradients with hvd.DistributedGradientTape.
    """
    rate = learning_rate_schedule(learning_rate_at(config, world_size))
    clip = config.max_grad_norm or None
    if config.optimizer == "adam" and config.layer_adaptation:
        built = Lamb(learning_rate=rate, epsilon=config.adam_epsilon, global_clipnorm=clip, layer_adaptation=True)
    elif config.optimizer == "adam":
        built = tf.keras.optimizers.Adam(learning_rate=rate, epsilon=config.adam_epsilon, global_clipnorm=clip)
    elif config.optimizer == "radam":
        built = RectifiedAdam(learning_rate=rate, epsilon=config.adam_epsilon, global_clipnorm=clip,
                              layer_adaptation=config.layer_adaptation)
    elif config.optimizer == "rmsprop":
        built = RootEpsilonRMSprop(learning_rate=rate, rho=config.rmsprop_rho, epsilon=config.rmsprop_epsilon,
                                   centered=config.rmsprop_centered, global_clipnorm=clip,
                                   layer_adaptation=config.layer_adaptation)
    else:
        raise ValueError(f"unknown optimizer {config.optimizer!r}; expected adam, radam or rmsprop")
    if config.mixed_precision:
        return tf.keras.mixed_precision.LossScaleOptimizer(built)
    if not distributed:
        return built
    return distributed_optimizer(built, config.fp16_allreduce, groups=allreduce_groups(config.elastic))


def learning_rate_schedule(rate: LearningRateAtRanks):
    """The Keras learning rate of `rate`: the number itself where it stays constant, else a schedule. Under
    --elastic the schedule holds the rank scale even for one rank, so `rescale_learning_rate` can follow the
    world as workers leave and join."""
    if rate.constant:
        return rate.base
    return WarmupToScaledLearningRate(rate.base, rate.scale, rate.warmup_updates, end_fraction=rate.end_fraction,
                                      decay_updates=rate.decay_updates)


def distributed_optimizer(optimizer, fp16_allreduce: bool = False, groups=None):
    """Horovod's DistributedOptimizer around `optimizer`, its gradients allreduced in `groups`
    (`hvd_dqn.agent.data_parallel_update.allreduce_groups`). With `fp16_allreduce` the gradients travel as float16
    (hvd.Compression.fp16: half the bytes on the wire, about 3 decimal digits) and are averaged and applied in
    float32."""
    import horovod.tensorflow.keras as hvd_keras

    compression = hvd_keras.Compression.fp16 if fp16_allreduce else hvd_keras.Compression.none
    return hvd_keras.DistributedOptimizer(optimizer, compression=compression, groups=groups)


def rescale_learning_rate(optimizer, config, world_size: int) -> bool:
    """Sets the rank scale of a step size that follows the world (`LearningRateAtRanks.follows_world`) to
    `world_size` ranks; returns whether there was one to set.

    DistributedOptimizer rebuilds the optimizer from its config, so the schedule to change is the one the
    wrapped optimizer holds, not the one `make_optimizer` created. Keras 2.11+'s `optimizer.learning_rate`
    returns the schedule's current value, not the schedule, hence the private `_learning_rate`."""
    rate = learning_rate_at(config, world_size)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # --mixed_precision's LossScaleOptimizer
    schedule = getattr(optimizer, "_learning_rate", None)
    if rate.follows_world and isinstance(schedule, WarmupToScaledLearningRate):
        schedule.set_scale(rate.scale)
        return True
    return False


def current_learning_rate(optimizer) -> float:
    rate = optimizer.learning_rate
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(optimizer.iterations))
    return float(tf.keras.backend.get_value(rate))


# Registered so Horovod can rebuild the optimizer from its config (DistributedOptimizer uses from_config).
@tf.keras.utils.register_keras_serializable(package="hvd_dqn")
class WarmupToScaledLearningRate(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Learning rate `base * scale`, reached linearly from `base` over `warmup_updates` updates, and all of it
    multiplied by a factor that falls linearly from 1 to `end_fraction` over `decay_updates` updates.

    With data parallelism the effective batch grows with the number of ranks; Goyal et al. (2017) scale the
    learning rate with it and warm up gradually so early updates do not diverge. Horovod's Keras examples
    do the same with `LearningRateWarmupCallback`; this is the custom-loop equivalent. The decay is the
    linear schedule Stable-Baselines3 offers for its learning rates: large steps while the values are far
    off, small ones once the policy is good, so late updates do not undo it.
    """

    def __init__(self, base: float, scale: float, warmup_updates: int, end_fraction: float = 1.0,
                 decay_updates: int = 0):
        super().__init__()
        self.base = float(base)
        # A variable, not a constant baked into the traced update: under Horovod Elastic the number of
        # ranks changes while the job runs, and `set_scale` follows it.
        self.scale = tf.Variable(float(scale), trainable=False, dtype=tf.float32, name="lr_scale")
        self.warmup_updates = int(warmup_updates)
        self.end_fraction = float(end_fraction)
        self.decay_updates = int(decay_updates)

    def set_scale(self, scale: float) -> None:
        self.scale.assign(float(scale))

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        rate = self.base * self.scale
        if self.warmup_updates > 0:
            fraction = tf.minimum(step / float(self.warmup_updates), 1.0)
            rate = self.base + fraction * (rate - self.base)
        if self.decay_updates > 0:
            fraction = tf.minimum(step / float(self.decay_updates), 1.0)
            rate = rate * (1.0 + fraction * (self.end_fraction - 1.0))
        return tf.identity(rate)

    def get_config(self):
        return {"base": self.base, "scale": float(self.scale.numpy()), "warmup_updates": self.warmup_updates,
                "end_fraction": self.end_fraction, "decay_updates": self.decay_updates}
