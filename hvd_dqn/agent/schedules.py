"""Schedules of a value against a step counter (epsilon against env steps, learning rate against updates)."""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from hvd_dqn.rank_split import scales_schedules


@dataclasses.dataclass(frozen=True)
class LinearSchedule:
    """Stays at `start` until step `delay`, goes linearly to `end` at step `delay + duration`, then stays.

    With duration 0 the value is `end` from step `delay` on. Used for epsilon as in Mnih et al. (2015), who
    anneal it from 1.0 to 0.1 over the first million frames; Dopamine's `linearly_decaying_epsilon` begins
    the decay only once the replay memory holds min_replay_history transitions (the `delay`).
    """

    start: float
    end: float
    duration: int
    delay: int = 0

    def __call__(self, step) -> float:
        if self.duration <= 0:
            return float(self.start if step < self.delay else self.end)
        fraction = np.clip((step - self.delay) / self.duration, 0.0, 1.0)
        return float(self.start + fraction * (self.end - self.start))


def apex_epsilons(num_envs_total: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Fixed exploration rates for the N envs of all ranks, as in Ape-X (Horgan et al. 2018):
    epsilon_i = base ** (1 + alpha * i / (N - 1)), from `base` for env 0 down to base ** (1 + alpha).
    Different envs then explore at different rates instead of all following one schedule."""
    if num_envs_total == 1:
        return np.array([base])
    exponents = 1.0 + alpha * np.arange(num_envs_total) / (num_envs_total - 1)
    return base**exponents


@dataclasses.dataclass(frozen=True)
class UpdateCountedSchedules:
    """The schedules counted in updates, as this world runs them (`update_counted_schedules`)."""
    target_update_period: int
    lr_warmup_updates: int
    lr_decay_updates: int


def update_counted_schedules(config, world_size: int) -> UpdateCountedSchedules:
    """The config's schedules counted in updates; with --scale_schedules_by_workers (--rank_scaling=batch),
    divided by the number of ranks, rounded half up and at least 1 where not 0.

    Under --rank_scaling=batch N ranks make N times fewer updates per env step, so a target network copied
    every K updates is copied every N times as many env steps, and a step size decaying over K updates decays
    over N times as many env steps: besides the N times larger batch, the run learns on another clock.
    Dividing by N keeps each schedule on one rank's env-step clock, as Goyal et al. (2017) keep their
    warm-up and decay in epochs while the batch grows."""
    divisor = world_size if scales_schedules(config) else 1

    def on_this_world(updates: int) -> int:
        return 0 if updates == 0 else max(1, int(updates / divisor + 0.5))

    return UpdateCountedSchedules(on_this_world(config.target_update_period), on_this_world(config.lr_warmup_updates),
                                  on_this_world(config.lr_decay_updates))


def learning_rate_scale(world_size: int, rule: str = "linear") -> float:
    """The factor on the learning rate for `world_size` ranks: N (linear; Goyal et al. 2017: the rate grows
    with the batch) or sqrt(N) (the gradient noise falls as 1/sqrt(batch); Krizhevsky 2014, Hoffer et al.
    2017)."""
    if rule == "linear":
        return float(world_size)
    if rule == "sqrt":
        return float(np.sqrt(world_size))
    raise ValueError(f"unknown learning-rate scale rule {rule!r}; expected linear or sqrt")


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
