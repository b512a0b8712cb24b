"""Schedules of a value against a step counter: epsilon against env steps (one schedule, or Ape-X's fixed
per-env values). The step size's schedule at N ranks is `hvd_dqn.agent.optimizers.WarmupToScaledLearningRate`,
its rule `hvd_dqn.rank_split.learning_rate_at`."""
from __future__ import annotations

import dataclasses

import numpy as np


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
