"""Per-rank replay memory for vector observations (classic control).

Each rank owns one memory and samples its own minibatches from it; nothing here is distributed. A
transition is (observation, action, reward, discount, next_observation), where `discount` is the
environment's continuation: 0.0 after a termination (no bootstrap), 1.0 otherwise, including after a
time-limit truncation, whose next_observation is the true last observation (bootstrapping from it is
correct; Pardo et al. 2018). The learner multiplies it by gamma.

Storage is a ring: once `capacity` transitions are held, each new one overwrites the oldest. Inserts and
samples are vectorised over the batch of environments / minibatch; there is no per-transition Python.
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import numpy as np


@dataclasses.dataclass
class Batch:
    """A minibatch, leading dimension B. Names follow the time index: *_tm1 at t-1, *_t at t."""

    observation_tm1: np.ndarray  # (B, *obs_shape)
    action_tm1: np.ndarray  # (B,) int32
    reward_t: np.ndarray  # (B,) float32
    discount_t: np.ndarray  # (B,) float32, 0 at terminations
    observation_t: np.ndarray  # (B, *obs_shape)


class ReplayMemory:
    """Uniform replay over the most recent `capacity` transitions."""

    def __init__(self, capacity: int, observation_shape: Tuple[int, ...], observation_dtype=np.float32):
        if capacity <= 0:
            raise ValueError(f"replay capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._observations = np.zeros((capacity, *observation_shape), dtype=observation_dtype)
        self._next_observations = np.zeros((capacity, *observation_shape), dtype=observation_dtype)
        self._actions = np.zeros((capacity,), dtype=np.int32)
        self._rewards = np.zeros((capacity,), dtype=np.float32)
        self._discounts = np.zeros((capacity,), dtype=np.float32)
        self._cursor = 0  # where the next transition goes
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def bytes_per_transition(self) -> int:
        arrays = (self._observations, self._next_observations, self._actions, self._rewards, self._discounts)
        return sum(array.nbytes for array in arrays) // self.capacity

    def add(self, observation, action, reward, discount, next_observation, episode_ended=None) -> None:
        """Stores a batch of N transitions (one per environment); each argument has leading dimension N.
        `episode_ended` is accepted for the same interface as FrameReplayMemory; whole observations are
        stored here, so nothing depends on it."""
        count = len(action)
        if count > self.capacity:
            raise ValueError(f"cannot add {count} transitions at once to a memory of capacity {self.capacity}")
        slots = (self._cursor + np.arange(count)) % self.capacity
        self._observations[slots] = observation
        self._actions[slots] = action
        self._rewards[slots] = reward
        self._discounts[slots] = discount
        self._next_observations[slots] = next_observation
        self._cursor = int((self._cursor + count) % self.capacity)
        self._size = min(self._size + count, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """Draws `batch_size` transitions uniformly, with replacement, from those held."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay memory")
        slots = rng.integers(0, self._size, size=batch_size)
        return self.gather(slots)

    def gather(self, slots: np.ndarray) -> Batch:
        """The transitions stored in ring positions `slots` (0 <= slot < len(self))."""
        return Batch(
            observation_tm1=self._observations[slots],
            action_tm1=self._actions[slots],
            reward_t=self._rewards[slots],
            discount_t=self._discounts[slots],
            observation_t=self._next_observations[slots],
        )
