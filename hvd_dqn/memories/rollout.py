"""PQN's memory on a rank: the rollout its envs are collecting, held until the rank has learned from it.

Unlike a replay memory it keeps one rollout only: --rollout_steps steps of every env of the rank, each with its
observation, action, learning reward and discount, the true next observation (the episode's last where it
ended: PQN bootstraps from it after a truncation) and whether the episode ended there. It has the replay
memories' interface where the trainer and checkpoints meet it (`add`, `cut_episodes`, `state`, `save`, `load`,
`digest`, `len`), so a checkpoint taken in the middle of a rollout holds it and a resumed run finishes it.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from hvd_dqn.memories.saved_arrays import SavedArrays, copy_into


class Rollout(SavedArrays):
    def __init__(self, steps: int, num_envs: int, observation_shape: Tuple[int, ...], observation_dtype):
        self.steps = steps
        self.num_envs = num_envs
        self.capacity = steps * num_envs
        shape = (steps, num_envs)
        self.observations = np.zeros(shape + tuple(observation_shape), dtype=observation_dtype)
        self.next_observations = np.zeros_like(self.observations)
        self.actions = np.zeros(shape, dtype=np.int32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.discounts = np.zeros(shape, dtype=np.float32)
        self.ended = np.zeros(shape, dtype=bool)
        self.filled = np.zeros((), dtype=np.int64)  # steps stored (an array, so that state() holds it)

    def __len__(self) -> int:
        return int(self.filled) * self.num_envs

    @property
    def full(self) -> bool:
        return int(self.filled) == self.steps

    @property
    def bytes_per_transition(self) -> int:
        return sum(array.nbytes for array in self.state().values()) // self.capacity

    def add(self, observation, action, reward, discount, next_observation, episode_ended) -> None:
        """Stores one step of every env (leading dimension num_envs), as the replay memories' `add` does."""
        if self.full:
            raise RuntimeError("the rollout is full: learn from it (and clear it) before storing more steps")
        step = int(self.filled)
        self.observations[step] = observation
        self.actions[step] = action
        self.rewards[step] = reward
        self.discounts[step] = discount
        self.next_observations[step] = next_observation
        self.ended[step] = episode_ended
        self.filled[...] = step + 1

    def clear(self) -> None:
        self.filled[...] = 0

    def cut_episodes(self) -> None:
        """The envs will go on with new episodes (a resume without their emulators): the newest stored step of
        each env ends its episode, as a truncation, so no return runs on into the new episode."""
        if int(self.filled):
            self.ended[int(self.filled) - 1] = True

    def state(self) -> Dict[str, np.ndarray]:
        return {name: value for name, value in vars(self).items() if isinstance(value, np.ndarray)}

    def load_state(self, state: Dict[str, np.ndarray]) -> None:
        """Restores `state()`; raises ValueError naming the first array whose shape or type differs (a rollout of
        another --rollout_steps, --num_envs or environment)."""
        self.check_state(state, "not a rollout of this run (written by another --agent?)",
                         "another --rollout_steps, --num_envs or environment?")
        for name, array in state.items():
            copy_into(getattr(self, name), array)
